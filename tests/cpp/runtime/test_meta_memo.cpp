// The meta check's memo of pure ops' results (runtime/core/meta_memo.h): hits only for the same
// op on the same argument metadata, fresh result tensors on every hit (the storage ledger
// must count each node's results), and nothing remembered that a fresh tensor would not
// reproduce.
#include <ATen/ATen.h>
#include "catch_compat.h"

#include "core/meta_memo.h"

using namespace pt2rt;

namespace {

c10::OperatorHandle op(const char* name, const char* overload) {
  auto h = c10::Dispatcher::singleton().findSchema({name, overload});
  REQUIRE(h.has_value());
  return *h;
}

at::Tensor meta(std::vector<int64_t> sizes) {
  return at::empty(sizes, at::TensorOptions().dtype(at::kFloat).device(c10::DeviceType::Meta));
}

torch::jit::Stack call(const c10::OperatorHandle& h, torch::jit::Stack args) {
  h.callBoxed(args);
  return args;
}

/// MetaMemo::lookup of the call of `h` on `args`.
bool lookup(const MetaMemo& memo, const c10::OperatorHandle& h, const torch::jit::Stack& args,
            torch::jit::Stack& results) {
  const std::optional<std::string> key = MetaMemo::key(h, args);
  REQUIRE(key.has_value());
  return memo.lookup(*key, results);
}

/// MetaMemo::remember of `results` of the call of `h` on `args`.
void remember(MetaMemo& memo, const c10::OperatorHandle& h, const torch::jit::Stack& args,
              const torch::jit::Stack& results) {
  const std::optional<std::string> key = MetaMemo::key(h, args);
  REQUIRE(key.has_value());
  memo.remember(*key, args, results);
}

}  // namespace

TEST_CASE("meta memo: the same op on the same argument metadata gets fresh copies of the results",
          "[meta_check][meta_memo]") {
  const auto mm = op("aten::mm", "");
  CHECK(MetaMemo::pure(mm.schema()));
  MetaMemo memo;
  const torch::jit::Stack args{meta({4, 3}), meta({3, 5})};
  torch::jit::Stack results;
  CHECK(!lookup(memo, mm, args, results));
  const torch::jit::Stack first = call(mm, args);
  remember(memo, mm, args, first);

  // Other tensors with the same metadata: a hit, with a new storage of the same layout.
  const torch::jit::Stack same{meta({4, 3}), meta({3, 5})};
  REQUIRE(lookup(memo, mm, same, results));
  REQUIRE(results.size() == 1);
  const at::Tensor& r = results[0].toTensor();
  CHECK(r.is_meta());
  CHECK(r.scalar_type() == at::kFloat);
  CHECK(r.sizes() == first[0].toTensor().sizes());
  CHECK(r.strides() == first[0].toTensor().strides());
  CHECK(!r.is_same(first[0].toTensor()));
  CHECK(r.storage().unsafeGetStorageImpl() != first[0].toTensor().storage().unsafeGetStorageImpl());

  // Different sizes, strides, dtype or op: misses.
  CHECK(!lookup(memo, mm, {meta({4, 3}), meta({3, 6})}, results));
  CHECK(!lookup(memo, mm, {meta({3, 4}).t(), meta({3, 5})}, results));
  CHECK(!lookup(memo, mm, {meta({4, 3}).to(at::kDouble), meta({3, 5}).to(at::kDouble)}, results));
  CHECK(!lookup(memo, op("aten::add", "Tensor"), {meta({4, 3}), meta({3, 5}), c10::IValue(1)}, results));
}

TEST_CASE("meta memo: non-tensor arguments are part of the key", "[meta_check][meta_memo]") {
  const auto sum = op("aten::sum", "dim_IntList");
  MetaMemo memo;
  const torch::jit::Stack args{meta({2, 3, 4}), c10::IValue(std::vector<int64_t>{1}), c10::IValue(false),
                               c10::IValue()};
  remember(memo, sum, args, call(sum, args));
  torch::jit::Stack results;
  CHECK(lookup(memo, sum, args, results));
  CHECK(results.at(0).toTensor().sizes() == at::IntArrayRef({2, 4}));
  const torch::jit::Stack keepdim{meta({2, 3, 4}), c10::IValue(std::vector<int64_t>{1}), c10::IValue(true),
                                  c10::IValue()};
  CHECK(!lookup(memo, sum, keepdim, results));
  const torch::jit::Stack other_dim{meta({2, 3, 4}), c10::IValue(std::vector<int64_t>{2}), c10::IValue(false),
                                    c10::IValue()};
  CHECK(!lookup(memo, sum, other_dim, results));
}

TEST_CASE("meta memo: aliasing ops and results a fresh tensor cannot reproduce are not remembered",
          "[meta_check][meta_memo]") {
  CHECK(!MetaMemo::pure(op("aten::view", "").schema()));   // returns an alias of self
  CHECK(!MetaMemo::pure(op("aten::add_", "Tensor").schema()));  // writes self
  MetaMemo memo;
  torch::jit::Stack results;
  const auto relu = op("aten::relu", "");
  const at::Tensor x = meta({8});
  // A result that shares the argument's storage, or has an offset into a larger one.
  remember(memo, relu, {x}, {x});
  CHECK(!lookup(memo, relu, {meta({8})}, results));
  const at::Tensor big = meta({16});
  remember(memo, relu, {meta({8})}, {big.narrow(0, 4, 8)});
  CHECK(!lookup(memo, relu, {meta({8})}, results));
  // A list result.
  const auto split = op("aten::split_with_sizes", "");
  const torch::jit::Stack sargs{meta({8}), c10::IValue(std::vector<int64_t>{4, 4}), c10::IValue(int64_t{0})};
  remember(memo, split, sargs, call(split, sargs));
  CHECK(!lookup(memo, split, sargs, results));
}
