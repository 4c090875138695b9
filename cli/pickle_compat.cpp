// cli/pickle_compat.cpp — APPEND/SETITEM -> APPENDS/SETITEMS for LibTorch 1.13's unpickler.
#include "pickle_compat.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace pt2rt::cli {
namespace {

constexpr int64_t kMark = -1;  // marker entry on the tracked stack

/// How one opcode changes the stack.
enum class Effect {
  Push,
  None,
  Pop1,
  Pop2,
  Pop3,
  PopMark,
  PopMarkPush,
  Pop1Push,
  Pop2Push,
  Pop3Push,
  Mark,
  Append,
  SetItem,
  Stop,
  Unknown
};

struct Op {
  Effect effect = Effect::Unknown;
  size_t arg_bytes = 0;  ///< fixed argument length
  int length_bytes = 0;  ///< 1/4/8: a little-endian length prefix, then that many bytes
  int newlines = 0;      ///< argument ends after this many '\n'
};

Op describe_op(uint8_t code) {
  switch (code) {
    case '(':
      return {Effect::Mark};
    case '.':
      return {Effect::Stop};
    case '0':
      return {Effect::Pop1};
    case '1':
      return {Effect::PopMark};
    case '2':
      return {Effect::Push};  // DUP
    case 'F':
    case 'I':
    case 'L':
    case 'S':
    case 'V':
    case 'g':
    case 'P':
      return {Effect::Push, 0, 0, 1};
    case 'p':
      return {Effect::None, 0, 0, 1};
    case 'c':
      return {Effect::Push, 0, 0, 2};
    case 'J':
      return {Effect::Push, 4};
    case 'K':
    case 'h':
      return {Effect::Push, 1};
    case 'M':
      return {Effect::Push, 2};
    case 'j':
      return {Effect::Push, 4};
    case 'G':
      return {Effect::Push, 8};
    case 'N':
    case '}':
    case ']':
    case ')':
    case 0x88:
    case 0x89:
    case 0x8f:
      return {Effect::Push};
    case 'T':
    case 'X':
    case 'B':
      return {Effect::Push, 0, 4};
    case 'U':
    case 'C':
    case 0x8c:
      return {Effect::Push, 0, 1};
    case 0x8d:
    case 0x8e:
      return {Effect::Push, 0, 8};
    case 0x8a:
      return {Effect::Push, 0, 1};  // LONG1
    case 0x8b:
      return {Effect::Push, 0, 4};  // LONG4
    case 'q':
      return {Effect::None, 1};
    case 'r':
      return {Effect::None, 4};
    case 0x94:
      return {Effect::None};  // MEMOIZE
    case 0x80:
      return {Effect::None, 1};  // PROTO
    case 'Q':
    case 0x85:
      return {Effect::Pop1Push};  // BINPERSID, TUPLE1
    case 'R':
    case 'b':
    case 0x86:
    case 0x81:
    case 0x93:
      return {Effect::Pop2Push};
    case 0x87:
    case 0x92:
      return {Effect::Pop3Push};
    case 'd':
    case 'l':
    case 't':
    case 0x91:
      return {Effect::PopMarkPush};
    case 'e':
    case 'u':
    case 0x90:
      return {Effect::PopMark};  // list/dict/set stays below
    case 'a':
      return {Effect::Append};
    case 's':
      return {Effect::SetItem};
    default:
      return {};  // INST, OBJ, EXT*, FRAME, PERSID variants we do not model
  }
}

uint64_t read_le(const std::string& s, size_t pos, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[pos + i]);
  return v;
}

}  // namespace

std::string normalize_pickle(const std::string& in) {
  if (in.find('a') == std::string::npos && in.find('s') == std::string::npos) return in;
  std::string out;
  out.reserve(in.size() + 64);
  std::vector<int64_t> starts;  // output offset where each stack value begins; kMark marks
  bool changed = false;
  auto pop_to_mark = [&]() -> std::optional<int64_t> {
    while (!starts.empty() && starts.back() != kMark) starts.pop_back();
    if (starts.empty()) return std::nullopt;
    starts.pop_back();
    return static_cast<int64_t>(0);
  };
  std::vector<int64_t> mark_offsets;  // output offset of each open MARK, innermost last
  size_t pos = 0;
  while (pos < in.size()) {
    const uint8_t code = static_cast<uint8_t>(in[pos]);
    const Op op = describe_op(code);
    if (op.effect == Effect::Unknown) return in;
    size_t end = pos + 1 + op.arg_bytes;
    if (op.length_bytes) {
      if (end + op.length_bytes > in.size()) return in;
      end += op.length_bytes + read_le(in, end, op.length_bytes);
    }
    for (int i = 0; i < op.newlines; ++i) {
      end = in.find('\n', end);
      if (end == std::string::npos) return in;
      ++end;
    }
    if (end > in.size()) return in;
    const auto here = static_cast<int64_t>(out.size());

    switch (op.effect) {
      case Effect::Mark:
        starts.push_back(kMark);
        mark_offsets.push_back(here);
        out.append(in, pos, end - pos);
        break;
      case Effect::Append:
      case Effect::SetItem: {
        const size_t items = op.effect == Effect::Append ? 1 : 2;
        if (starts.size() < items + 1) return in;
        const int64_t first = starts[starts.size() - items];
        if (first == kMark) return in;
        out.insert(static_cast<size_t>(first), 1, '(');
        out.push_back(op.effect == Effect::Append ? 'e' : 'u');
        starts.resize(starts.size() - items);
        changed = true;
        break;
      }
      default: {
        int pops = 0;
        bool push = false, to_mark = false;
        switch (op.effect) {
          case Effect::Push:
            push = true;
            break;
          case Effect::Pop1:
            pops = 1;
            break;
          case Effect::Pop2:
            pops = 2;
            break;
          case Effect::Pop3:
            pops = 3;
            break;
          case Effect::Pop1Push:
            pops = 1;
            push = true;
            break;
          case Effect::Pop2Push:
            pops = 2;
            push = true;
            break;
          case Effect::Pop3Push:
            pops = 3;
            push = true;
            break;
          case Effect::PopMark:
            to_mark = true;
            break;
          case Effect::PopMarkPush:
            to_mark = true;
            push = true;
            break;
          default:
            break;
        }
        int64_t start = here;
        if (to_mark) {
          if (mark_offsets.empty() || !pop_to_mark()) return in;
          start = mark_offsets.back();
          mark_offsets.pop_back();
        }
        for (int i = 0; i < pops; ++i) {
          if (starts.empty() || starts.back() == kMark) return in;
          start = starts.back();
          starts.pop_back();
        }
        if (push) starts.push_back(start);
        out.append(in, pos, end - pos);
        break;
      }
    }
    pos = end;
    if (op.effect == Effect::Stop) break;
  }
  if (!changed) return in;
  out.append(in, pos, std::string::npos);
  return out;
}

}  // namespace pt2rt::cli
