// loader/descriptors.cpp — readable names of descriptors, kinds and roles, in AOTAutograd's
// spelling (torch._functorch._aot_autograd.descriptors: dataclass reprs such as
// `ParamAOTInput(target='fc.weight')`), descriptor equality, Program::graph.
#include <string>

#include "pt2rt/program.h"
#include "pt2rt/text.h"

namespace pt2rt {
namespace {

// Archive text, escaped one-to-one (reprs double as set keys in validate.cpp).
std::string str(const std::string& s) { return quoted(s, std::string::npos); }

std::string nested(const std::shared_ptr<const InputDescriptor>& d) {
  return d ? d->to_string() : "None";
}
std::string nested(const std::shared_ptr<const OutputDescriptor>& d) {
  return d ? d->to_string() : "None";
}

template <typename T>
bool same(const std::shared_ptr<const T>& a, const std::shared_ptr<const T>& b) {
  if (!a || !b) return !a && !b;
  return *a == *b;
}

}  // namespace

const char* to_string(InputKind kind) {
  switch (kind) {
    case InputKind::Unknown: return "Unknown";
    case InputKind::Param: return "Param";
    case InputKind::Buffer: return "Buffer";
    case InputKind::Plain: return "Plain";
    case InputKind::Tangent: return "Tangent";
    case InputKind::Saved: return "Saved";
    case InputKind::Constant: return "Constant";
    case InputKind::PhiloxForwardSeed: return "PhiloxForwardSeed";
    case InputKind::PhiloxForwardBaseOffset: return "PhiloxForwardBaseOffset";
    case InputKind::PhiloxBackwardSeed: return "PhiloxBackwardSeed";
    case InputKind::PhiloxBackwardBaseOffset: return "PhiloxBackwardBaseOffset";
    case InputKind::ForwardToken: return "ForwardToken";
    case InputKind::BackwardToken: return "BackwardToken";
    case InputKind::SubclassGetAttr: return "SubclassGetAttr";
    case InputKind::SubclassSize: return "SubclassSize";
    case InputKind::SubclassStride: return "SubclassStride";
    case InputKind::ViewBase: return "ViewBase";
    case InputKind::SyntheticBase: return "SyntheticBase";
    case InputKind::Dummy: return "Dummy";
  }
  return "<invalid InputKind>";
}

const char* to_string(OutputKind kind) {
  switch (kind) {
    case OutputKind::Unknown: return "Unknown";
    case OutputKind::Plain: return "Plain";
    case OutputKind::Grad: return "Grad";
    case OutputKind::InputMutation: return "InputMutation";
    case OutputKind::Saved: return "Saved";
    case OutputKind::IntermediateBase: return "IntermediateBase";
    case OutputKind::ForwardToken: return "ForwardToken";
    case OutputKind::BackwardToken: return "BackwardToken";
    case OutputKind::PhiloxUpdatedForwardOffset: return "PhiloxUpdatedForwardOffset";
    case OutputKind::PhiloxUpdatedBackwardOffset: return "PhiloxUpdatedBackwardOffset";
    case OutputKind::SubclassGetAttr: return "SubclassGetAttr";
    case OutputKind::SubclassSize: return "SubclassSize";
    case OutputKind::SubclassStride: return "SubclassStride";
    case OutputKind::Dummy: return "Dummy";
    case OutputKind::MetadataMutation: return "MetadataMutation";
    case OutputKind::SavedNoVcCheck: return "SavedNoVcCheck";
  }
  return "<invalid OutputKind>";
}

bool has_base(InputKind kind) {
  switch (kind) {
    case InputKind::SubclassGetAttr:
    case InputKind::SubclassSize:
    case InputKind::SubclassStride:
    case InputKind::ViewBase:
    case InputKind::SyntheticBase:
      return true;
    default:
      return false;
  }
}

bool has_base(OutputKind kind) {
  switch (kind) {
    case OutputKind::IntermediateBase:
    case OutputKind::SubclassGetAttr:
    case OutputKind::SubclassSize:
    case OutputKind::SubclassStride:
      return true;
    default:
      return false;
  }
}

const char* to_string(ValueKind kind) {
  switch (kind) {
    case ValueKind::Tensor: return "Tensor";
    case ValueKind::SymInt: return "SymInt";
    case ValueKind::SymFloat: return "SymFloat";
    case ValueKind::SymBool: return "SymBool";
    case ValueKind::None: return "None";
    case ValueKind::TensorList: return "TensorList";
    case ValueKind::OptionalTensorList: return "OptionalTensorList";
  }
  return "<invalid ValueKind>";
}

const char* to_string(GraphRole role) {
  switch (role) {
    case GraphRole::Inference: return "inference";
    case GraphRole::Forward: return "forward";
    case GraphRole::Backward: return "backward";
    case GraphRole::Joint: return "joint";
  }
  return "<invalid GraphRole>";
}

const char* to_string(WeightKind kind) {
  switch (kind) {
    case WeightKind::Parameter: return "parameter";
    case WeightKind::Buffer: return "buffer";
    case WeightKind::Constant: return "constant";
  }
  return "<invalid WeightKind>";
}

std::string InputDescriptor::to_string() const {
  const std::string i = std::to_string(idx);
  switch (kind) {
    case InputKind::Unknown: return "UnknownAOTInput()";
    case InputKind::Param: return "ParamAOTInput(target=" + str(fqn) + ")";
    case InputKind::Buffer: return "BufferAOTInput(target=" + str(fqn) + ")";
    case InputKind::Constant: return "ConstantAOTInput(target=" + str(fqn) + ")";
    case InputKind::Plain: return "PlainAOTInput(idx=" + i + ")";
    case InputKind::Tangent: return "TangentAOTInput(output=" + nested(output) + ")";
    case InputKind::Saved: return "SavedForBackwardsAOTInput(idx=" + i + ")";
    case InputKind::PhiloxForwardSeed: return "PhiloxForwardSeedAOTInput()";
    case InputKind::PhiloxForwardBaseOffset: return "PhiloxForwardBaseOffsetAOTInput()";
    case InputKind::PhiloxBackwardSeed: return "PhiloxBackwardSeedAOTInput()";
    case InputKind::PhiloxBackwardBaseOffset: return "PhiloxBackwardBaseOffsetAOTInput()";
    case InputKind::ForwardToken: return "ForwardTokenAOTInput(idx=" + i + ")";
    case InputKind::BackwardToken: return "BackwardTokenAOTInput(idx=" + i + ")";
    case InputKind::SubclassGetAttr:
      return "SubclassGetAttrAOTInput(base=" + nested(base) + ", attr=" + str(attr) + ")";
    case InputKind::SubclassSize:
      return "SubclassSizeAOTInput(base=" + nested(base) + ", idx=" + i + ")";
    case InputKind::SubclassStride:
      return "SubclassStrideAOTInput(base=" + nested(base) + ", idx=" + i + ")";
    case InputKind::ViewBase: return "ViewBaseAOTInput(base_of=" + nested(base) + ")";
    case InputKind::SyntheticBase: return "SyntheticBaseAOTInput(base_of=" + nested(base) + ")";
    case InputKind::Dummy: return "DummyAOTInput(idx=" + i + ")";
  }
  return "InvalidAOTInput(kind=" + std::to_string(static_cast<int>(kind)) + ")";
}

std::string OutputDescriptor::to_string() const {
  const std::string i = std::to_string(idx);
  switch (kind) {
    case OutputKind::Unknown: return "UnknownAOTOutput()";
    case OutputKind::Plain: return "PlainAOTOutput(idx=" + i + ")";
    case OutputKind::Grad: return "GradAOTOutput(grad_of=" + nested(of) + ")";
    case OutputKind::InputMutation:
      return "InputMutationAOTOutput(mutated_input=" + nested(of) + ")";
    case OutputKind::Saved: return "SavedForBackwardsAOTOutput(idx=" + i + ")";
    case OutputKind::IntermediateBase:
      return "IntermediateBaseAOTOutput(base_of=" + nested(base) + ")";
    case OutputKind::ForwardToken: return "ForwardTokenAOTOutput(idx=" + i + ")";
    case OutputKind::BackwardToken: return "BackwardTokenAOTOutput(idx=" + i + ")";
    case OutputKind::PhiloxUpdatedForwardOffset: return "PhiloxUpdatedForwardOffsetAOTOutput()";
    case OutputKind::PhiloxUpdatedBackwardOffset:
      return "PhiloxUpdatedBackwardOffsetAOTOutput()";
    case OutputKind::SubclassGetAttr:
      return "SubclassGetAttrAOTOutput(base=" + nested(base) + ", attr=" + str(attr) + ")";
    case OutputKind::SubclassSize:
      return "SubclassSizeAOTOutput(base=" + nested(base) + ", idx=" + i + ")";
    case OutputKind::SubclassStride:
      return "SubclassStrideAOTOutput(base=" + nested(base) + ", idx=" + i + ")";
    case OutputKind::Dummy: return "DummyAOTOutput(idx=" + i + ")";
    case OutputKind::MetadataMutation: return "MetadataMutationAOTOutput(idx=" + i + ")";
    case OutputKind::SavedNoVcCheck: return "SavedForBackwardsNoVcCheckAOTOutput(idx=" + i + ")";
  }
  return "InvalidAOTOutput(kind=" + std::to_string(static_cast<int>(kind)) + ")";
}

bool InputDescriptor::operator==(const InputDescriptor& o) const {
  return kind == o.kind && fqn == o.fqn && idx == o.idx && attr == o.attr &&
         same(output, o.output) && same(base, o.base);
}

bool OutputDescriptor::operator==(const OutputDescriptor& o) const {
  return kind == o.kind && idx == o.idx && attr == o.attr && same(of, o.of) &&
         same(base, o.base);
}

size_t InputSpec::num_tensors() const {
  if (kind == Kind::Tensor) return 1;
  size_t n = 0;
  for (const InputSpec& c : children) n += c.num_tensors();
  return n;
}

const Graph* Program::graph(GraphRole role) const {
  for (const Graph& g : graphs) {
    if (g.role == role) return &g;
  }
  return nullptr;
}

}  // namespace pt2rt
