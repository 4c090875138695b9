// runtime/model/load_options.cpp — RunLimits' defaults (see pt2rt/load_options.h).
#include "pt2rt/load_options.h"

#include <algorithm>

#include "core/run_cost.h"

namespace pt2rt {

RunLimits RunLimits::resolved(uint64_t archive_bytes) const {
  RunLimits r = *this;
  if (r.max_bytes == 0) {
    r.max_bytes = std::max(kBytesFloor, sat_mul(kBytesPerArchiveByte, archive_bytes));
  }
  if (r.max_work == 0) {
    const uint64_t mib = archive_bytes >> 20;
    r.max_work = std::max(kWorkFloor, sat_mul(sat_mul(kWorkPerArchiveByte, archive_bytes),
                                              std::max<uint64_t>(1, mib)));
  }
  return r;
}

}  // namespace pt2rt
