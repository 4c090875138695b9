// pt2rt/text.h — archive text made safe to show.
//
// Names, op overloads, stack traces and metadata come from the archive, i.e. from whoever made
// it. pt2rt puts them into error messages and `export-cli` output only through these helpers,
// so an archive cannot smuggle terminal control sequences (ESC [ ...), carriage returns or
// NUL bytes into a log or a terminal.
#pragma once

#include <cstddef>
#include <string>

namespace pt2rt {

/// `text` with every byte outside printable ASCII (0x20..0x7e) and the backslash written as
/// `\xNN` (so the mapping is one-to-one), cut after `limit` input bytes with "..." appended.
/// Newlines become `\x0a` too: the result is always one line.
std::string escaped(const std::string& text, size_t limit = std::string::npos);

/// escaped(text, limit) in single quotes; a quote inside is escaped as well.
std::string quoted(const std::string& text, size_t limit = 256);

}  // namespace pt2rt
