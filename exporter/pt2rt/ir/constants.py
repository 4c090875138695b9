"""The archive's fixed names and versions, in one place (mirror of include/pt2rt/constants.h).

tests/python/test_constants.py checks that this module and the C++ header agree.
"""

ARCHIVE_FORMAT = "pt2rt"
ARCHIVE_VERSION = "1"
ARCHIVE_FORMAT_ENTRY = "archive_format"
ARCHIVE_VERSION_ENTRY = "archive_version"
PROGRAM_ENTRY = "program.fb"
WEIGHTS_PREFIX = "weights/"
EXTRA_PREFIX = "extra/"
OPTIMIZER_PREFIX = "optimizer/"
TRAINING_STATE_ENTRY = "optimizer/state.fb"
TRAINING_STATE_IDENTIFIER = "PT2T"
PROGRAM_IDENTIFIER = "PT2R"
SCHEMA_MAJOR = 1
SCHEMA_MINOR = 6
MAX_INPUT_SPEC_DEPTH = 16  # levels an input's structure may nest (schema 1.6 InputSpec)
DATA_ALIGNMENT = 64
GRAD_SKETCH_SEED = 0x70327274  # "p2rt"
GRAD_SKETCH_PROJECTIONS = 8
GRAD_SKETCH_MAX_PROJECTIONS = 64
GRAD_SKETCH_MAX_NUMEL = 2 ** 32  # exclusive
