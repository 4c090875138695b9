// cli/terminal.h — export-cli's output is safe to show on a terminal, whatever the archive.
//
// Names, op overloads, stack traces and metadata come from the archive. export-cli installs
// a TerminalSafeText filter on std::cout and std::cerr for its whole run: every byte that a
// terminal could take as a control — C0 controls other than newline and tab (ESC, CR, BEL,
// backspace ...), C1 controls (U+0080..U+009F) and bytes that are not valid UTF-8 — is
// written as `\xNN`; printable ASCII and valid UTF-8 text pass unchanged. So no archive can
// move the cursor, retitle the window, set the clipboard (OSC 52) or overwrite a line.
// The CLI's own control sequences (the progress bar's "\r\033[K") go through write_control.
#pragma once

#include <ostream>
#include <streambuf>
#include <string>

namespace pt2rt::cli {

/// Installs the filter on std::cout and std::cerr while alive (flushes and restores them on
/// destruction). One per process, in main().
class TerminalSafeText {
 public:
  TerminalSafeText();
  ~TerminalSafeText();
  TerminalSafeText(const TerminalSafeText&) = delete;
  TerminalSafeText& operator=(const TerminalSafeText&) = delete;

 private:
  std::streambuf* saved_out_;
  std::streambuf* saved_err_;
};

/// Writes the CLI's own control sequence `seq` to `os` unfiltered (flushing what precedes it).
void write_control(std::ostream& os, const char* seq);

/// `text` as the filter would show it (for tests and for strings built before printing).
std::string terminal_safe(const std::string& text);

/// An error message made one line for the default error output: its first line, at most
/// `limit` bytes, with " (--verbose for details)" when lines or bytes were left out.
std::string one_line(const std::string& message, size_t limit = 400);

}  // namespace pt2rt::cli
