// pt2rt/program.h — the decoded, verified program of a model.pt2 archive.
//
// `Program` is a plain C++ mirror of the FlatBuffer root table `pt2rt.fb.Program`
// (schema/pt2rt.fbs), decoded once at load by `decode_program` after the FlatBuffers
// Verifier and the semantic checks passed. It never exposes the flatc-generated types.
// Everything here is immutable after load and shared (std::shared_ptr<const Program>)
// by the execution plans of all graphs and by every thread.
//
// Descriptors follow AOTAutograd's AOTInput/AOTOutput
// (torch._functorch._aot_autograd.descriptors; PyTorch docs,
// "aot_export_joint_with_descriptors"): a graph's calling convention is given by its descriptors, never by position.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pt2rt/limits.h"

namespace pt2rt {

// ---------------------------------------------------------------------------
// Symbolic shapes

enum class SymOp : uint8_t {
  Const = 0, Symbol = 1, Add = 2, Sub = 3, Mul = 4, FloorDiv = 5, Mod = 6, Neg = 7,
  Max = 8, Min = 9, CeilDiv = 10, Eq = 11, Ne = 12, Lt = 13, Le = 14, Gt = 15, Ge = 16
};

/// Expression tree over Program::symbols (e.g. `2 * s0`).
struct SymExpr {
  SymOp op = SymOp::Const;
  int64_t value = 0;        ///< Const
  uint32_t symbol = 0;      ///< Symbol: index into Program::symbols
  std::vector<SymExpr> operands;
};

/// A size, stride or storage offset: static when `expr` is empty, else symbolic
/// with `value` the hint seen at export.
struct Dim {
  int64_t value = 0;
  std::optional<SymExpr> expr;
  bool is_static() const { return !expr.has_value(); }
};

struct Symbol {
  std::string name;  ///< e.g. "s0"
  int64_t hint = 0;
};

/// torch.export range constraint, both bounds inclusive; max == INT64_MAX: unbounded.
struct RangeConstraint {
  uint32_t symbol = 0;
  int64_t min = 0;
  int64_t max = INT64_MAX;
};

// ---------------------------------------------------------------------------
// Values

enum class ValueKind : uint8_t {
  Tensor = 0, SymInt = 1, SymFloat = 2, SymBool = 3, None = 4, TensorList = 5,
  OptionalTensorList = 6
};
/// "Tensor", "SymInt", "SymFloat", "SymBool", "None", "TensorList", "OptionalTensorList".
const char* to_string(ValueKind kind);

struct TensorMeta {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<Dim> sizes;
  std::vector<Dim> strides;
  Dim storage_offset;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  bool requires_grad = false;
  c10::Layout layout = c10::Layout::Strided;
};

/// One SSA slot of a graph. Value ids are indices into Graph::values.
struct Value {
  std::string name;                 ///< FX node name; user inputs: forward() argument name
  ValueKind kind = ValueKind::Tensor;
  std::optional<TensorMeta> meta;   ///< set for Tensor values
  std::optional<SymExpr> sym;       ///< set for SymInt/SymFloat/SymBool values
  /// Schema 1.5: a result whose shape legitimately differs between devices (eval-mode
  /// BatchNorm's save_mean/save_invstd, _embedding_bag's offset2bag and max_indices): `meta`
  /// holds what the exporting device made; the runtime checks its dtype and a size bound
  /// instead of these sizes (runtime/core/result_check.h).
  bool device_dependent_shape = false;
};

// ---------------------------------------------------------------------------
// Arguments (the union ArgumentValue of the schema)

using ValueId = uint32_t;

struct NoneArg {};
struct TensorRef { ValueId value; };
struct TensorListArg { std::vector<ValueId> values; };
struct OptionalTensorListArg { std::vector<int64_t> values; };  ///< -1 = None
struct TensorListRef { ValueId value; };
struct IntListArg { std::vector<int64_t> values; };
struct SymIntRef { ValueId value; };
/// SymInt[]: element i is `values[i]`, or the SymInt value with that id when is_ref[i].
struct SymIntListArg { std::vector<int64_t> values; std::vector<bool> is_ref; };
struct FloatListArg { std::vector<double> values; };
struct BoolListArg { std::vector<bool> values; };
struct SymFloatRef { ValueId value; };
struct SymBoolRef { ValueId value; };

using ArgumentValue = std::variant<
    NoneArg, TensorRef, TensorListArg, OptionalTensorListArg, TensorListRef,
    int64_t, IntListArg, SymIntRef, SymIntListArg, double, FloatListArg, bool, BoolListArg,
    std::string, c10::Scalar, c10::ScalarType, c10::Layout, c10::MemoryFormat, c10::Device,
    SymFloatRef, SymBoolRef>;

struct Argument {
  std::string name;         ///< schema argument name seen at export
  ArgumentValue value;
  bool kwarg_only = false;  ///< match by name against the runtime schema
};

// ---------------------------------------------------------------------------
// Operators and nodes

/// An op overload: name "aten::addmm", overload "" (FX ".default") or e.g. "Tensor".
/// pt2rt's own: "prim::getitem" (TensorList element), "sym::*" (SymInt arithmetic).
struct Operator {
  std::string name;
  std::string overload;
  /// Schema string seen at export. When it differs from the running LibTorch's, the archive
  /// comes from another torch version: arguments that do not fit are reported in the
  /// OpResolutionError (not as a damaged archive).
  std::string schema;
  /// "aten::addmm" or "aten::add.Tensor".
  std::string qualified() const { return overload.empty() ? name : name + "." + overload; }
};

struct DebugInfo {
  std::string fx_name;
  std::string module_fqn;
  std::vector<std::string> nn_module_stack;
  std::string stack_trace;
};

struct Node {
  uint32_t op = 0;                  ///< index into Program::operators
  std::vector<Argument> args;       ///< positional first, then kwarg_only
  std::vector<ValueId> outputs;     ///< one per returned element
  DebugInfo debug;
};

// ---------------------------------------------------------------------------
// Descriptors

enum class InputKind : uint8_t {
  Unknown = 0, Param = 1, Buffer = 2, Plain = 3, Tangent = 4, Saved = 5, Constant = 6,
  PhiloxForwardSeed = 7, PhiloxForwardBaseOffset = 8, PhiloxBackwardSeed = 9,
  PhiloxBackwardBaseOffset = 10, ForwardToken = 11, BackwardToken = 12,
  SubclassGetAttr = 13, SubclassSize = 14, SubclassStride = 15, ViewBase = 16,
  SyntheticBase = 17, Dummy = 18
};

enum class OutputKind : uint8_t {
  Unknown = 0, Plain = 1, Grad = 2, InputMutation = 3, Saved = 4, IntermediateBase = 5,
  ForwardToken = 6, BackwardToken = 7, PhiloxUpdatedForwardOffset = 8,
  PhiloxUpdatedBackwardOffset = 9, SubclassGetAttr = 10, SubclassSize = 11,
  SubclassStride = 12, Dummy = 13, MetadataMutation = 14, SavedNoVcCheck = 15
};

struct OutputDescriptor;

/// AOTInput. Which fields are meaningful depends on `kind` (see schema/pt2rt.fbs).
struct InputDescriptor {
  InputKind kind = InputKind::Unknown;
  std::string fqn;                            ///< Param, Buffer, Constant
  int64_t idx = 0;                            ///< Plain, Saved, tokens, Subclass*, Dummy
  std::shared_ptr<const OutputDescriptor> output;  ///< Tangent: the output it is the cotangent of
  std::shared_ptr<const InputDescriptor> base;     ///< Subclass*, ViewBase, SyntheticBase
  std::string attr;                           ///< SubclassGetAttr
  /// Readable form as in AOTAutograd, e.g. `ParamAOTInput(target='fc.weight')`.
  std::string to_string() const;
  bool operator==(const InputDescriptor& o) const;
  bool operator<(const InputDescriptor& o) const { return to_string() < o.to_string(); }
};

/// AOTOutput.
struct OutputDescriptor {
  OutputKind kind = OutputKind::Unknown;
  int64_t idx = 0;                            ///< Plain, Saved, tokens, Subclass*, Dummy
  std::shared_ptr<const InputDescriptor> of;  ///< Grad, InputMutation
  std::shared_ptr<const OutputDescriptor> base;  ///< IntermediateBase, Subclass*
  std::string attr;
  /// e.g. `GradAOTOutput(grad_of=ParamAOTInput(target='fc.weight'))`.
  std::string to_string() const;
  bool operator==(const OutputDescriptor& o) const;
  bool operator<(const OutputDescriptor& o) const { return to_string() < o.to_string(); }
};

const char* to_string(InputKind kind);
const char* to_string(OutputKind kind);

/// True for the kinds whose descriptor wraps another one in `base` (AOTAutograd's subclass and
/// view-base descriptors): inputs SubclassGetAttr, SubclassSize, SubclassStride, ViewBase,
/// SyntheticBase; outputs IntermediateBase, SubclassGetAttr, SubclassSize, SubclassStride.
bool has_base(InputKind kind);
bool has_base(OutputKind kind);

struct GraphInput {
  ValueId value = 0;
  InputDescriptor descriptor;
};

struct GraphOutput {
  int64_t value = -1;               ///< -1: None (e.g. an unused gradient)
  OutputDescriptor descriptor;
};

enum class GraphRole : uint8_t { Inference = 0, Forward = 1, Backward = 2, Joint = 3 };
const char* to_string(GraphRole role);

struct Graph {
  GraphRole role = GraphRole::Inference;
  std::vector<Value> values;
  std::vector<Node> nodes;          ///< topological order
  std::vector<GraphInput> inputs;
  std::vector<GraphOutput> outputs;
};

// ---------------------------------------------------------------------------
// Weights

enum class WeightKind : uint8_t { Parameter = 0, Buffer = 1, Constant = 2 };
const char* to_string(WeightKind kind);

/// Metadata of one weight; its bytes are the zip entry `entry` (raw little-endian storage).
struct WeightInfo {
  std::string fqn;
  WeightKind kind = WeightKind::Parameter;
  bool persistent = true;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;       ///< elements
  bool requires_grad = false;
  std::string entry;                ///< "weights/<n>"
  uint64_t byte_length = 0;         ///< exact entry size, verified against dtype × storage numel
};

// ---------------------------------------------------------------------------
// Bundled examples

/// A tensor stored inline in program.fb (contiguous, row-major); `data` owns its bytes.
struct TensorData {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> data;
  /// Schema 1.5, references only: root-mean-square difference between this float32 eager
  /// reference and eager PyTorch's float64 result; NaN when not recorded (schema/README.md
  /// "The float64 rule").
  double float64_rmse = std::numeric_limits<double>::quiet_NaN();
};

/// A gradient summarised in float64 (schema 1.2): norm, sum, abs sum, max abs and seeded
/// random projections of the flattened gradient. Definition, seed and tolerance rule:
/// pt2rt/grad_sketch.h and schema/README.md "Gradient sketches".
struct GradSketch {
  std::string name;  ///< FQN or "input:<i>"
  c10::ScalarType dtype = c10::ScalarType::Float;  ///< the gradient's dtype
  std::vector<int64_t> sizes;
  double norm = 0.0;     ///< sqrt(sum g[j]^2)
  double sum = 0.0;      ///< sum g[j]
  double abs_sum = 0.0;  ///< sum |g[j]|
  double max_abs = 0.0;  ///< max |g[j]|
  std::vector<double> projections;  ///< projections[k] = sum_j sign_k(j) * g[j]
  /// Schema 1.5: the same statistics of eager PyTorch's float64 gradient (null: not
  /// recorded); "The float64 rule" of schema/README.md.
  std::shared_ptr<const GradSketch> float64;
  /// Schema 1.5: root-mean-square difference between this (eager float32) gradient and eager
  /// PyTorch's float64 one; NaN: not recorded.
  double float64_rmse = std::numeric_limits<double>::quiet_NaN();
};

struct ExampleReferences {
  std::vector<TensorData> outputs;        ///< eval-mode (inference graph) outputs, eager
  std::vector<TensorData> train_outputs;  ///< training-mode outputs, eager
  std::vector<TensorData> grad_outputs;   ///< cotangents used, one per differentiable output
  /// FQN -> full gradient (archives before schema 1.2, `full_references`, or gradients that
  /// cannot be sketched).
  std::vector<std::pair<std::string, TensorData>> grads;
  std::vector<std::pair<std::string, TensorData>> buffers;  ///< FQN -> value after training forward
  uint32_t grad_sketch_seed = 0;              ///< seed of the sketches' sign vectors
  std::vector<GradSketch> grad_sketches;      ///< compact gradient references (schema 1.2)
};

struct Example {
  std::string name;
  std::vector<TensorData> inputs;
  std::optional<ExampleReferences> references;  ///< absent once the weights changed
};

// ---------------------------------------------------------------------------

struct Producer {
  std::string exporter_version;
  std::string torch_version;
  std::string python_version;
  std::string capture;
  /// Schema 1.5: device type the model was on at export ("cpu", "cuda"); where the eager
  /// references were computed. The graphs run on any device.
  std::string capture_device = "cpu";
};

/// The structure of one forward() parameter as passed at export (schema 1.6; torch.export's
/// `in_spec`): a Tensor (one user input), or a Tuple / List / Dict of `children` in order
/// (a Dict's `keys`, one per child). Its tensors, in this order, are consecutive user inputs.
struct InputSpec {
  enum class Kind : uint8_t { Tensor = 0, Tuple = 1, List = 2, Dict = 3 };
  Kind kind = Kind::Tensor;
  std::vector<std::string> keys;       ///< Dict only: one per child
  std::vector<InputSpec> children;
  /// The number of tensors below this node (1 for a Tensor).
  size_t num_tensors() const;
};

/// One forward() parameter passed at export, with its structure (schema 1.6).
struct InputParam {
  std::string name;
  InputSpec spec;
};

/// The whole decoded program. Weight bytes are not here (see weights.h).
struct Program {
  uint32_t schema_major = 0;
  uint32_t schema_minor = 0;
  Producer producer;
  std::vector<Operator> operators;
  std::vector<Graph> graphs;
  std::vector<WeightInfo> weights;  ///< parameters (named_parameters order), buffers, constants
  std::vector<Symbol> symbols;
  std::vector<RangeConstraint> range_constraints;
  std::vector<Example> examples;
  std::map<std::string, std::string> metadata;
  /// One name per user output, Plain(i) order (schema 1.4): forward()'s return value as a
  /// pytree path written like torch.utils._pytree.keystr ("['logits']", "[1]"), "output" for
  /// a single tensor. Empty for archives before 1.4 (pt2rt/signature.h then names the outputs
  /// positionally, "[i]"). Validated: as many as user outputs, 1..256 bytes without control
  /// characters, all different.
  std::vector<std::string> output_names;
  /// forward()'s parameters as passed at export, positional ones first (schema 1.6). Empty for
  /// archives before 1.6: every user input is then one Tensor parameter. Validated: at most
  /// 16 levels of nesting, Dict keys 1..256 bytes without control characters and all
  /// different within their Dict, parameter names likewise, as many tensors as user inputs.
  std::vector<InputParam> inputs;

  /// The graph with this role, or nullptr when the archive has none.
  const Graph* graph(GraphRole role) const;
};

/// Whether decode_program converts the bundled examples (inputs and eager references — the
/// references hold a copy of every parameter gradient, as large as the weights). Skip leaves
/// Program::examples empty: the FlatBuffers Verifier still checks their tables, but no byte
/// of them is copied, charged or kept. Model::load skips them; Model::examples() and
/// read_examples decode them when asked for.
enum class BundledExamples { Decode, Skip };

/// Decodes and validates `program.fb` bytes: size (ArchiveLimits::max_program_bytes),
/// FlatBuffers Verifier (bounded depth and table count), schema major version (a higher minor
/// is accepted), conversion into this IR within ArchiveLimits::decoded_bytes_for(size) bytes
/// (every union value and nested table checked present; 8-byte scalar vectors 8-byte aligned),
/// then the semantic pass (linear in the program's size) — value ids in range, each defined once and before use; op indices valid;
/// descriptors' targets exist; every Grad(of) names a trainable input; weight
/// byte_length == element size × storage numel (checked arithmetic, no overflow).
/// Argument kinds are checked against the runtime schema later, by the runtime.
/// @param data, size  the bytes of program.fb; not retained.
/// @throws FormatError naming the entry "program.fb" and what is wrong.
std::shared_ptr<const Program> decode_program(const uint8_t* data, size_t size,
                                              const ArchiveLimits& limits = {},
                                              BundledExamples examples = BundledExamples::Decode);

class Archive;

/// The bytes of the archive's program.fb, which must be STORED (like every entry the format
/// writes; a compressed program is refused before anything is inflated) and at most
/// ArchiveLimits::max_program_bytes (and the 2 GiB a FlatBuffer can address). Model::load,
/// Model::save and `export-cli inspect` all read the program through this.
/// @throws FormatError naming the archive and the entry.
std::vector<uint8_t> read_program_bytes(const Archive& archive, const ArchiveLimits& limits = {});

/// read_program_bytes, then decode_program. For an archive opened on a mapping
/// (Archive::open_mapped) the program is decoded in place from the mapped entry, with every
/// check of read_program_bytes and decode_program but the entry's CRC-32 (reading it would
/// touch every byte of the bundled examples).
/// @throws FormatError naming the archive and the entry.
std::shared_ptr<const Program> read_program(const Archive& archive,
                                            const ArchiveLimits& limits = {},
                                            BundledExamples examples = BundledExamples::Decode);

/// The bundled examples of `archive`'s program (read_program with examples decoded, then
/// only its examples kept). What Model::examples() returns for a loaded model.
/// @throws FormatError as read_program.
std::vector<Example> read_examples(const Archive& archive, const ArchiveLimits& limits = {});

}  // namespace pt2rt
