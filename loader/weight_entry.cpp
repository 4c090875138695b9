// loader/weight_entry.cpp — see weight_entry.h.
#include "weight_entry.h"

#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "validate.h"

namespace pt2rt {

CheckedEntry check_weight_entry(const Archive& archive, const WeightInfo& w,
                                const std::string& what) {
  if (!archive.has_entry(w.entry)) throw FormatError(what + ": the entry is missing");
  CheckedEntry c;
  c.entry = &archive.entry(w.entry);
  const EntryInfo& e = *c.entry;
  if (!e.stored) {
    throw FormatError(what + ": the entry is compressed (zip method " + std::to_string(e.method) +
                      "); weights must be STORED");
  }
  if (e.data_offset % kDataAlignment != 0) {
    throw FormatError(what + ": data at offset " + std::to_string(e.data_offset) + " is not " +
                      std::to_string(kDataAlignment) + "-byte aligned");
  }
  // Re-checked: decode_program validated them, but a hand-made Program may come here.
  if (!checked_storage_numel(w.sizes, w.strides, w.storage_offset, &c.numel) ||
      !checked_nbytes(c.numel, w.dtype, &c.nbytes)) {
    throw FormatError(what + ": sizes/strides/storage_offset are negative or overflow");
  }
  if (e.size != c.nbytes) {
    throw FormatError(what + ": the entry has " + std::to_string(e.size) + " bytes, expected " +
                      std::to_string(c.nbytes) + " (" + c10::toString(w.dtype) + " x " +
                      std::to_string(c.numel) + " storage elements)");
  }
  return c;
}

void check_bool_bytes(const uint8_t* bytes, uint64_t n, const std::string& what) {
  for (uint64_t i = 0; i < n; ++i) {
    if (bytes[i] > 1) {
      throw FormatError(what + ": bool element " + std::to_string(i) + " has byte value " +
                        std::to_string(bytes[i]) + " (only 0 and 1 are valid)");
    }
  }
}

void require_little_endian(const std::string& source) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  throw FormatError(source +
                    ": weights are stored little-endian and this host is big-endian; "
                    "pt2rt does not byte-swap weights");
#else
  (void)source;
#endif
}

}  // namespace pt2rt
