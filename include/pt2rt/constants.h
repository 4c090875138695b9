// pt2rt/constants.h — the archive's fixed names and versions, in one place.
//
// The Python side keeps the same values in exporter/pt2rt/ir/constants.py; the test
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
/// Training state (schema 1.3): `optimizer/state.fb` (FlatBuffer TrainingState, identifier
/// kTrainingStateIdentifier) and its tensors `optimizer/<n>`.
inline constexpr const char* kOptimizerPrefix = "optimizer/";
inline constexpr const char* kTrainingStateEntry = "optimizer/state.fb";
inline constexpr const char* kTrainingStateIdentifier = "PT2T";
/// FlatBuffer file identifier of program.fb.
inline constexpr const char* kProgramIdentifier = "PT2R";
/// Schema version this build reads and writes (schema/README.md).
inline constexpr uint32_t kSchemaMajor = 1;
inline constexpr uint32_t kSchemaMinor = 6;
/// Schema 1.6: the most levels an input's structure (InputSpec) may nest below its parameter.
inline constexpr uint32_t kMaxInputSpecDepth = 16;
/// Every STORED entry's data starts on this boundary (bytes).
inline constexpr std::size_t kDataAlignment = 64;
/// Gradient sketches (schema 1.2, pt2rt/grad_sketch.h): the seed and projection count the
/// exporter writes, and the bounds a reader enforces (checking costs numel x projections).
inline constexpr uint32_t kGradSketchSeed = 1882354292;  // 0x70327274, "p2rt"
inline constexpr uint32_t kGradSketchProjections = 8;
inline constexpr uint32_t kGradSketchMaxProjections = 64;
inline constexpr uint64_t kGradSketchMaxNumel = 4294967296;  // 2^32, exclusive

}  // namespace pt2rt
