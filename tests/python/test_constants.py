"""exporter/pt2rt/ir/constants.py and include/pt2rt/constants.h agree (names and values)."""
from __future__ import annotations

import os
import re

from pt2rt.ir import constants

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(ROOT, "include", "pt2rt", "constants.h")


def _snake(camel: str) -> str:
    """kArchiveFormatEntry -> ARCHIVE_FORMAT_ENTRY."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel[1:]).upper()


def parse_header(text: str) -> dict:
    out = {}
    for name, value in re.findall(r'constexpr\s+const\s+char\s*\*\s*(k\w+)\s*=\s*"([^"]*)"\s*;',
                                  text):
        out[_snake(name)] = value
    for name, value in re.findall(r"constexpr\s+(?:std::)?(?:u?int\d+_t|size_t)\s+(k\w+)\s*=\s*"
                                  r"(\d+)\s*;", text):
        out[_snake(name)] = int(value)
    return out


def test_python_constants_equal_cpp_header():
    with open(HEADER) as f:
        cpp = parse_header(f.read())
    py = {k: v for k, v in vars(constants).items() if k.isupper()}
    assert cpp, "no constants parsed from constants.h"
    assert cpp == py


def test_parser_sees_a_changed_value():
    text = 'inline constexpr const char* kArchiveFormat = "other";\n' \
           'inline constexpr uint32_t kSchemaMajor = 7;\n'
    assert parse_header(text) == {"ARCHIVE_FORMAT": "other", "SCHEMA_MAJOR": 7}
