// loader/text.cpp — see pt2rt/text.h.
#include "pt2rt/text.h"

#include <cstdio>

namespace pt2rt {
namespace {

std::string escape(const std::string& text, size_t limit, bool quote) {
  std::string out;
  const size_t n = text.size() < limit ? text.size() : limit;
  out.reserve(n + 2);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && !(quote && c == '\'')) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > n) out += "...";
  return out;
}

}  // namespace

std::string escaped(const std::string& text, size_t limit) { return escape(text, limit, false); }

std::string quoted(const std::string& text, size_t limit) {
  return "'" + escape(text, limit, true) + "'";
}

}  // namespace pt2rt
