// cli/terminal.cpp — see terminal.h.
#include "terminal.h"

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

namespace pt2rt::cli {
namespace {

/// Validates UTF-8 incrementally; escapes what a terminal could interpret as a control.
/// The filtered bytes of each call are handed on in one `sputn`, so a line written with one
/// `<<` reaches an unbuffered stderr as one write(2): several processes sharing a pipe (the
/// ranks of `train --nproc-per-node`) interleave whole pieces, not single characters.
class SafeBuf final : public std::streambuf {
 public:
  explicit SafeBuf(std::streambuf* out) : out_(out) {}

  /// Writes `seq` as is (after any pending bytes).
  void raw(const char* seq) {
    flush_pending();
    emit();
    out_->sputn(seq, static_cast<std::streamsize>(std::char_traits<char>::length(seq)));
  }

 protected:
  int overflow(int ch) override {
    if (ch != traits_type::eof()) put(static_cast<unsigned char>(ch));
    emit();
    return ch == traits_type::eof() ? 0 : ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) put(static_cast<unsigned char>(s[i]));
    emit();
    return n;
  }
  int sync() override {
    flush_pending();
    emit();
    return out_->pubsync();
  }

 private:
  void escape(unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", c);
    staged_.append(buf, 4);
  }
  /// Hands the staged bytes to the wrapped buffer in one call.
  void emit() {
    if (staged_.empty()) return;
    out_->sputn(staged_.data(), static_cast<std::streamsize>(staged_.size()));
    staged_.clear();
  }
  void flush_pending() {
    for (size_t i = 0; i < pending_len_; ++i) escape(pending_[i]);
    pending_len_ = need_ = 0;
  }
  void put(unsigned char c) {
    if (need_ > 0) {
      if ((c & 0xc0) == 0x80) {
        pending_[pending_len_++] = c;
        if (--need_ == 0) finish_sequence();
        return;
      }
      flush_pending();  // truncated sequence: escape its bytes, then look at c afresh
    }
    if (c < 0x80) {
      if (c >= 0x20 || c == '\n' || c == '\t') staged_.push_back(static_cast<char>(c));
      else escape(c);
      return;
    }
    const size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0) {
      escape(c);
      return;
    }
    pending_[0] = c;
    pending_len_ = 1;
    need_ = len - 1;
  }
  void finish_sequence() {
    uint32_t cp = pending_[0] & (pending_len_ == 2 ? 0x1f : pending_len_ == 3 ? 0x0f : 0x07);
    for (size_t i = 1; i < pending_len_; ++i) cp = (cp << 6) | (pending_[i] & 0x3f);
    const uint32_t min = pending_len_ == 2 ? 0x80 : pending_len_ == 3 ? 0x800 : 0x10000;
    const bool valid = cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) &&
                       !(cp >= 0x80 && cp <= 0x9f);  // C1 controls (CSI, OSC ...)
    if (valid) {
      staged_.append(reinterpret_cast<const char*>(pending_), pending_len_);
      pending_len_ = need_ = 0;
    } else {
      flush_pending();
    }
  }

  std::streambuf* out_;
  std::string staged_;  // filtered bytes of the current call, not yet handed on
  unsigned char pending_[4] = {};
  size_t pending_len_ = 0;
  size_t need_ = 0;
};

std::unique_ptr<SafeBuf> out_filter, err_filter;

}  // namespace

TerminalSafeText::TerminalSafeText() : saved_out_(std::cout.rdbuf()), saved_err_(std::cerr.rdbuf()) {
  out_filter = std::make_unique<SafeBuf>(saved_out_);
  err_filter = std::make_unique<SafeBuf>(saved_err_);
  std::cout.rdbuf(out_filter.get());
  std::cerr.rdbuf(err_filter.get());
}

TerminalSafeText::~TerminalSafeText() {
  std::cout.flush();
  std::cerr.flush();
  std::cout.rdbuf(saved_out_);
  std::cerr.rdbuf(saved_err_);
  out_filter.reset();
  err_filter.reset();
}

void write_control(std::ostream& os, const char* seq) {
  os.flush();
  if (auto* safe = dynamic_cast<SafeBuf*>(os.rdbuf())) safe->raw(seq);
  else os << seq;
  os.flush();
}

std::string terminal_safe(const std::string& text) {
  std::stringbuf sink;
  SafeBuf filter(&sink);
  filter.sputn(text.data(), static_cast<std::streamsize>(text.size()));
  filter.pubsync();
  return sink.str();
}

std::string one_line(const std::string& message, size_t limit) {
  const size_t nl = message.find('\n');
  std::string line = message.substr(0, std::min(nl, limit));
  while (!line.empty() && (line.back() == ' ' || line.back() == ':')) line.pop_back();
  if (nl != std::string::npos || message.size() > limit) line += " (--verbose for details)";
  return line;
}

}  // namespace pt2rt::cli
