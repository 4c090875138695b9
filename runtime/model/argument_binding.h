// runtime/model/argument_binding.h — positional and keyword arguments bound to parameter
// names, as Python binds a call to `forward(...)` (no defaults, no varargs): the binding
// behind Model::forward(args, kwargs) (one tensor per user input) and flatten_inputs
// (pt2rt/input_tree.h: one value per forward() parameter).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pt2rt/errors.h"
#include "pt2rt/text.h"

namespace pt2rt {

/// `args` bound to `names` in order, then `kwargs` by name.
/// @returns one value per name, in `names` order.
/// @throws InputError listing every unknown name, name given twice (also positionally) and
///   missing name, with the names taken; or for more `args` than names.
template <typename T>
std::vector<T> bind_arguments(const std::vector<std::string>& names, const std::vector<T>& args,
                              const std::vector<std::pair<std::string, T>>& kwargs) {
  const size_t n = names.size();
  auto taken = [&] {
    std::string all;
    for (const std::string& name : names) all += (all.empty() ? "" : ", ") + quoted(name);
    return all.empty() ? std::string("no inputs") : "inputs " + all;
  };
  if (args.size() > n) {
    throw InputError(std::to_string(args.size()) + " positional inputs for a model that takes " +
                     std::to_string(n) + " (" + taken() + ")");
  }
  std::vector<T> bound(args);
  bound.resize(n);
  std::vector<bool> given(n, false);
  std::fill(given.begin(), given.begin() + static_cast<std::ptrdiff_t>(args.size()), true);
  std::string unknown, twice, missing;
  for (const auto& [name, value] : kwargs) {
    size_t i = 0;
    while (i < n && names[i] != name) ++i;
    std::string& list = i == n ? unknown : given[i] ? twice : missing;
    if (&list != &missing) {
      list += (list.empty() ? "" : ", ") + quoted(name);
      continue;
    }
    bound[i] = value;
    given[i] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!given[i]) missing += (missing.empty() ? "" : ", ") + quoted(names[i]);
  }
  if (!unknown.empty() || !twice.empty() || !missing.empty()) {
    std::string msg;
    auto add = [&](const std::string& what, const std::string& list) {
      if (!list.empty()) msg += (msg.empty() ? "" : "; ") + what + list;
    };
    add("unknown input name(s) ", unknown);
    add("input(s) given twice ", twice);
    add("missing input(s) ", missing);
    throw InputError(msg + " (the model takes " + taken() + ")");
  }
  return bound;
}

}  // namespace pt2rt
