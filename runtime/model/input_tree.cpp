// runtime/model/input_tree.cpp — see pt2rt/input_tree.h.
#include "pt2rt/input_tree.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>

#include "model/argument_binding.h"
#include "pt2rt/errors.h"
#include "pt2rt/text.h"

namespace pt2rt {
namespace {

std::string kind_of(const c10::IValue& v) {
  if (v.isTensor()) return "tensor";
  if (v.isTuple()) return "tuple of " + std::to_string(v.toTupleRef().elements().size());
  if (v.isList()) return "list of " + std::to_string(v.toListRef().size());
  if (v.isGenericDict()) return "dict of " + std::to_string(v.toGenericDict().size());
  if (v.isNone()) return "None";
  return v.tagKind();
}

void flatten(const InputSpec& spec, const c10::IValue& v, const std::string& path,
             std::vector<at::Tensor>& out) {
  auto wrong = [&] {
    throw InputError("input " + quoted(path) + ": expected " + input_spec_string(spec) +
                     ", got a " + kind_of(v));
  };
  switch (spec.kind) {
    case InputSpec::Kind::Tensor:
      if (!v.isTensor()) wrong();
      out.push_back(v.toTensor());
      return;
    case InputSpec::Kind::Tuple:
    case InputSpec::Kind::List: {
      if (!v.isTuple() && !v.isList()) wrong();
      const std::vector<c10::IValue> items =
          v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
      if (items.size() != spec.children.size()) wrong();
      for (size_t i = 0; i < items.size(); ++i) {
        flatten(spec.children[i], items[i], path + "[" + std::to_string(i) + "]", out);
      }
      return;
    }
    case InputSpec::Kind::Dict: {
      if (!v.isGenericDict()) wrong();
      const c10::impl::GenericDict dict = v.toGenericDict();
      if (dict.size() != spec.keys.size()) wrong();
      for (const auto& entry : dict) {
        if (!entry.key().isString()) wrong();
      }
      for (size_t i = 0; i < spec.keys.size(); ++i) {
        const auto it = dict.find(c10::IValue(spec.keys[i]));
        if (it == dict.end()) wrong();
        flatten(spec.children[i], it->value(), path + "['" + spec.keys[i] + "']", out);
      }
      return;
    }
  }
  wrong();
}

}  // namespace

std::vector<at::Tensor> flatten_inputs(const Signature& signature,
                                       const std::vector<c10::IValue>& args,
                                       const NamedValues& kwargs) {
  std::vector<std::string> names;
  for (const InputParam& p : signature.params) names.push_back(p.name);
  const std::vector<c10::IValue> values = bind_arguments(names, args, kwargs);
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < values.size(); ++i) {
    flatten(signature.params[i].spec, values[i], names[i], out);
  }
  return out;
}

bool has_structured_inputs(const std::vector<InputParam>& params) {
  for (const InputParam& p : params) {
    if (p.spec.kind != InputSpec::Kind::Tensor) return true;
  }
  return false;
}

std::string input_spec_string(const InputSpec& spec) {
  switch (spec.kind) {
    case InputSpec::Kind::Tensor:
      return "Tensor";
    case InputSpec::Kind::Tuple:
    case InputSpec::Kind::List:
    case InputSpec::Kind::Dict: {
      std::string s = spec.kind == InputSpec::Kind::Tuple  ? "tuple["
                      : spec.kind == InputSpec::Kind::List ? "list["
                                                           : "dict[";
      for (size_t i = 0; i < spec.children.size(); ++i) {
        if (i) s += ", ";
        if (spec.kind == InputSpec::Kind::Dict) s += quoted(spec.keys[i]) + ": ";
        s += input_spec_string(spec.children[i]);
      }
      return s + "]";
    }
  }
  return "?";
}

}  // namespace pt2rt
