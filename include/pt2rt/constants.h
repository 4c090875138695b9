// pt2rt/constants.h — the archive's fixed names and versions, in one place.
//
// The Python side keeps the same values in exporter/pt2rt/constants.py; the test
// tests/python/test_constants.py checks that both files agree.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pt2rt {

/// Content of the `archive_format` entry.
inline constexpr const char* kArchiveFormat = "pt2rt";
/// Content of the `archive_version` entry: the major version of the zip layout.
inline constexpr const char* kArchiveVersion = "1";
/// Zip entry names.
inline constexpr const char* kArchiveFormatEntry = "archive_format";
inline constexpr const char* kArchiveVersionEntry = "archive_version";
inline constexpr const char* kProgramEntry = "program.fb";
inline constexpr const char* kWeightsPrefix = "weights/";
inline constexpr const char* kExtraPrefix = "extra/";
/// FlatBuffer file identifier of program.fb.
inline constexpr const char* kProgramIdentifier = "PT2R";
/// Schema version this build reads and writes (schema/README.md).
inline constexpr uint32_t kSchemaMajor = 1;
inline constexpr uint32_t kSchemaMinor = 1;
/// Every STORED entry's data starts on this boundary (bytes).
inline constexpr std::size_t kDataAlignment = 64;

}  // namespace pt2rt
