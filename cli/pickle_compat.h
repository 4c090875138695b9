// cli/pickle_compat.h — make Python's torch.save pickles readable by LibTorch 1.13.
//
// LibTorch 1.13's unpickler (torch/csrc/jit/serialization/unpickler.cpp) knows the batched
// opcodes APPENDS ('e') and SETITEMS ('u') but not their single-item forms APPEND ('a')
// and SETITEM ('s'), which Python's pickle emits for a list with one element or a dict with
// one entry (e.g. `torch.save([x], f)`): "Unknown opcode for unpickling at 0x61: 97".
#pragma once

#include <string>

namespace pt2rt::cli {

/// Rewrites each APPEND as MARK <item> APPENDS and each SETITEM as MARK <key> <value>
/// SETITEMS — the same objects, in opcodes LibTorch 1.13 understands. Walks the opcodes
/// (protocols 0-3 and the protocol 4 opcodes without FRAME) tracking where each stack value
/// starts; returns `pickle` unchanged when it meets an opcode it does not model, leaving the
/// unpickler to report it.
std::string normalize_pickle(const std::string& pickle);

}  // namespace pt2rt::cli
