// runtime/core/batched_copy.h: copy_all / clone_all copy every pair exactly, keep a dense
// source's strides, leave undefined entries alone, and take pairs the batch cannot (another
// dtype, other strides, a broadcast source) one by one — on the CPU and, where there is one,
// on CUDA (one _foreach_copy_ launch there).
#include "catch_compat.h"

#include <ATen/ATen.h>

#include "core/batched_copy.h"

namespace pt2rt {

TEST_CASE("batched_copy: clone_all and copy_all copy every defined tensor exactly",
          "[batched_copy][cuda]") {
  std::vector<at::Device> devices{at::kCPU};
  if (at::hasCUDA()) devices.emplace_back(at::kCUDA);
  for (const at::Device device : devices) {
    INFO(device);
    at::manual_seed(0);
    const auto opts = at::device(device);
    const std::vector<at::Tensor> src = {at::randn({4, 3}, opts), at::Tensor(),
                                         at::randn({5, 2}, opts).t(),  // transposed, dense
                                         at::randn({7}, opts.dtype(at::kDouble)),
                                         at::randn({3}, opts).expand({2, 3})};  // overlapping
    const std::vector<at::Tensor> copies = clone_all(src);
    REQUIRE(copies.size() == src.size());
    CHECK_FALSE(copies[1].defined());
    for (size_t i : {0, 2, 3, 4}) {
      INFO("tensor " << i);
      CHECK(at::equal(copies[i], src[i]));
      CHECK_FALSE(copies[i].is_alias_of(src[i]));
      CHECK(copies[i].scalar_type() == src[i].scalar_type());
    }
    CHECK(copies[2].strides() == src[2].strides());  // a dense source's layout is kept
    CHECK(copies[4].is_contiguous());                // an overlapping one becomes contiguous

    std::vector<at::Tensor> dst = {at::zeros({4, 3}, opts), at::zeros({2}, opts),
                                   at::zeros({2, 5}, opts), at::zeros({7}, opts.dtype(at::kDouble)),
                                   at::zeros({2, 3}, opts)};
    copy_all(dst, src);
    CHECK(at::equal(dst[0], src[0]));
    CHECK(at::equal(dst[1], at::zeros({2}, opts)));  // its source is undefined: untouched
    CHECK(at::equal(dst[2], src[2]));                // other strides: copied on its own
    CHECK(at::equal(dst[3], src[3]));
    CHECK(at::equal(dst[4], src[4]));
    CHECK_THROWS(copy_all({at::zeros({3}, opts)}, {at::zeros({4}, opts)}));
    CHECK_THROWS(copy_all({at::zeros({3}, opts)}, {}));
  }
}

}  // namespace pt2rt
