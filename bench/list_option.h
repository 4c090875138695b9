// bench/list_option.h — the value of a benchmark's list option ("--models a,b,c").
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace pt2rt::bench {

/// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
inline std::vector<std::string> comma_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace pt2rt::bench
