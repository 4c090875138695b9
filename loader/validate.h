// loader/validate.h — the semantic pass over a decoded Program (loader-internal).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt {

/// Checks everything decode_program promises (program.h) that the Verifier cannot:
///  * operators: names present; graphs: one per role, forward and backward come together;
///  * values: ids in range, each defined exactly once (graph inputs and node outputs define
///    values) and before use; reference arguments point at values of the right kind;
///    op indices valid; static sizes/strides non-negative; SymExpr symbols exist;
///  * descriptors: no Unknown kind, nested descriptors present, unique per graph; Param /
///    Buffer / Constant targets are weights of that kind; Plain indices are 0..n-1;
///    Grad(of) names a trainable input (Param with requires_grad, or a Plain input of the
///    forward graph); InputMutation(of) names an input of its graph; Saved(k) outputs of
///    forward pair one-to-one with Saved(k) inputs of backward; Tangent(output) names an
///    output of forward;
///  * weights: FQNs and entry names unique, entries under weights/, sizes/strides/offset
///    non-negative, numel and storage numel without overflow, byte_length ==
///    element size × storage numel; requires_grad only on floating/complex dtypes;
///  * examples: tensor data sizes match dtype × numel;
///  * output names (schema 1.4): none, or one per user output, 1..256 bytes, no control
///    characters, all different.
/// @throws FormatError ("program.fb: graph 'forward', node 3 'relu': ...") on the first problem.
void validate_program(const Program& program);

/// Number of elements of a tensor with these sizes (checked multiplication).
/// Returns false on a negative size or overflow of int64.
bool checked_numel(const std::vector<int64_t>& sizes, int64_t* out);

/// Elements of storage a strided tensor spans: 0 when it has no elements, else
/// storage_offset + 1 + sum((size_i - 1) * stride_i). Sizes, strides and the offset must be
/// non-negative and sizes/strides of equal length. Returns false on violation or overflow.
bool checked_storage_numel(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                           int64_t storage_offset, int64_t* out);

/// numel × element size of `dtype` in bytes, false on overflow.
bool checked_nbytes(int64_t numel, c10::ScalarType dtype, uint64_t* out);

}  // namespace pt2rt
