// loader/weight_entry.h — the checks every way of materializing a weight shares (read:
// load_weights; mapped: map_weights). Loader-internal.
#pragma once

#include <cstdint>
#include <string>

#include "pt2rt/archive.h"
#include "pt2rt/program.h"

namespace pt2rt {

struct CheckedEntry {
  const EntryInfo* entry = nullptr;
  int64_t numel = 0;    ///< storage elements
  uint64_t nbytes = 0;  ///< = entry->size
};

/// Weight `w`'s entry in `archive`: present, STORED, data 64-byte aligned, exactly
/// dtype x storage-numel bytes (checked arithmetic). `what` names the weight in messages.
/// @throws FormatError naming `what` and the numbers.
CheckedEntry check_weight_entry(const Archive& archive, const WeightInfo& w,
                                const std::string& what);

/// @throws FormatError when one of the `n` bytes of a bool weight is neither 0 nor 1.
void check_bool_bytes(const uint8_t* bytes, uint64_t n, const std::string& what);

/// @throws FormatError on a big-endian host (weights are stored little-endian; no swapping).
void require_little_endian(const std::string& source);

}  // namespace pt2rt
