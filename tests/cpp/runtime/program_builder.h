// tests/cpp/runtime/program_builder.h — small hand-built Programs for runtime unit tests.
//
// Lets a test write a graph node by node without the Python exporter, e.g.
//   ProgramBuilder pb;
//   GraphBuilder& g = pb.graph(GraphRole::Inference);
//   ValueId w = g.input(param("w"), tensor_value("w", kFloat, {3}));
//   ValueId x = g.input(plain(0), tensor_value("x", kFloat, {3}));
//   ValueId y = g.node("aten::mul", "Tensor", {arg(w), arg(x)}, {tensor_value("y", kFloat, {3})})[0];
//   g.output(plain_out(0), y);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt::test {

inline TensorMeta meta(c10::ScalarType dtype, std::vector<int64_t> sizes) {
  TensorMeta m;
  m.dtype = dtype;
  int64_t stride = 1;
  m.strides.resize(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    m.strides[i].value = stride;
    stride *= sizes[i];
  }
  for (int64_t s : sizes) m.sizes.push_back(Dim{s, std::nullopt});
  return m;
}

inline Value tensor_value(std::string name, c10::ScalarType dtype, std::vector<int64_t> sizes) {
  Value v;
  v.name = std::move(name);
  v.kind = ValueKind::Tensor;
  v.meta = meta(dtype, std::move(sizes));
  return v;
}

inline Value value_of_kind(std::string name, ValueKind kind) {
  Value v;
  v.name = std::move(name);
  v.kind = kind;
  return v;
}

inline InputDescriptor param(std::string fqn) {
  InputDescriptor d;
  d.kind = InputKind::Param;
  d.fqn = std::move(fqn);
  return d;
}
inline InputDescriptor buffer(std::string fqn) {
  InputDescriptor d;
  d.kind = InputKind::Buffer;
  d.fqn = std::move(fqn);
  return d;
}
inline InputDescriptor plain(int64_t i) {
  InputDescriptor d;
  d.kind = InputKind::Plain;
  d.idx = i;
  return d;
}
inline InputDescriptor saved_in(int64_t k) {
  InputDescriptor d;
  d.kind = InputKind::Saved;
  d.idx = k;
  return d;
}
inline OutputDescriptor plain_out(int64_t i) {
  OutputDescriptor d;
  d.kind = OutputKind::Plain;
  d.idx = i;
  return d;
}
inline OutputDescriptor saved_out(int64_t k) {
  OutputDescriptor d;
  d.kind = OutputKind::Saved;
  d.idx = k;
  return d;
}

inline OutputDescriptor saved_no_vc_out(int64_t k) {
  OutputDescriptor d;
  d.kind = OutputKind::SavedNoVcCheck;
  d.idx = k;
  return d;
}
inline InputDescriptor tangent(int64_t output) {
  InputDescriptor d;
  d.kind = InputKind::Tangent;
  d.output = std::make_shared<OutputDescriptor>(plain_out(output));
  return d;
}
inline OutputDescriptor grad_of(InputDescriptor of) {
  OutputDescriptor d;
  d.kind = OutputKind::Grad;
  d.of = std::make_shared<InputDescriptor>(std::move(of));
  return d;
}
inline OutputDescriptor mutation_of(InputDescriptor of) {
  OutputDescriptor d;
  d.kind = OutputKind::InputMutation;
  d.of = std::make_shared<InputDescriptor>(std::move(of));
  return d;
}

inline Argument arg(ArgumentValue v, std::string name = "", bool kwarg_only = false) {
  return Argument{std::move(name), std::move(v), kwarg_only};
}
inline Argument tensor_arg(ValueId v, std::string name = "") { return arg(TensorRef{v}, std::move(name)); }
inline Argument kwarg(std::string name, ArgumentValue v) { return arg(std::move(v), std::move(name), true); }

class ProgramBuilder;

class GraphBuilder {
 public:
  GraphBuilder(ProgramBuilder& pb, Graph& g) : pb_(pb), g_(g) {}
  ValueId add_value(Value v) {
    g_.values.push_back(std::move(v));
    return static_cast<ValueId>(g_.values.size() - 1);
  }
  ValueId input(InputDescriptor d, Value v) {
    ValueId id = add_value(std::move(v));
    g_.inputs.push_back(GraphInput{id, std::move(d)});
    return id;
  }
  /// Appends a node calling `name.overload`; returns the ids of its new output values.
  std::vector<ValueId> node(const std::string& name, const std::string& overload,
                            std::vector<Argument> args, std::vector<Value> outputs,
                            std::string fx_name = "", std::string stack_trace = "");
  void output(OutputDescriptor d, int64_t value) {
    g_.outputs.push_back(GraphOutput{value, std::move(d)});
  }
  Graph& graph() { return g_; }

 private:
  ProgramBuilder& pb_;
  Graph& g_;
};

class ProgramBuilder {
 public:
  ProgramBuilder() {
    program_ = std::make_shared<Program>();
    program_->schema_major = 1;
    program_->producer.torch_version = "9.9.0";
  }
  GraphBuilder graph(GraphRole role) {
    program_->graphs.emplace_back();
    program_->graphs.back().role = role;
    return GraphBuilder(*this, program_->graphs.back());
  }
  uint32_t op(const std::string& name, const std::string& overload) {
    for (size_t i = 0; i < program_->operators.size(); ++i) {
      if (program_->operators[i].name == name && program_->operators[i].overload == overload) {
        return static_cast<uint32_t>(i);
      }
    }
    program_->operators.push_back(Operator{name, overload, ""});
    return static_cast<uint32_t>(program_->operators.size() - 1);
  }
  void weight(std::string fqn, WeightKind kind, c10::ScalarType dtype, std::vector<int64_t> sizes,
              bool requires_grad = false) {
    WeightInfo w;
    w.fqn = std::move(fqn);
    w.kind = kind;
    w.dtype = dtype;
    w.sizes = std::move(sizes);
    w.requires_grad = requires_grad;
    w.entry = "weights/" + std::to_string(program_->weights.size());
    program_->weights.push_back(std::move(w));
  }
  /// Reserve graph storage up front: GraphBuilder holds references into Program::graphs.
  void reserve_graphs(size_t n) { program_->graphs.reserve(n); }
  std::shared_ptr<Program> program() { return program_; }

 private:
  std::shared_ptr<Program> program_;
};

inline std::vector<ValueId> GraphBuilder::node(const std::string& name, const std::string& overload,
                                               std::vector<Argument> args,
                                               std::vector<Value> outputs, std::string fx_name,
                                               std::string stack_trace) {
  Node n;
  n.op = pb_.op(name, overload);
  n.args = std::move(args);
  std::vector<ValueId> ids;
  for (Value& v : outputs) ids.push_back(add_value(std::move(v)));
  n.outputs = ids;
  n.debug.fx_name = fx_name.empty() ? (name.substr(name.find(':') + 2) + "_" +
                                       std::to_string(g_.nodes.size()))
                                    : std::move(fx_name);
  n.debug.stack_trace = std::move(stack_trace);
  g_.nodes.push_back(std::move(n));
  return ids;
}

}  // namespace pt2rt::test
