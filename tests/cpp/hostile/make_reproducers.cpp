// pt2rt_make_reproducers <dir> — writes every hostile reproducer of reproducers.h into <dir>
// (archives as .pt2, bare programs as .fb): inputs of tests/cli/test_hostile.py and seeds of
// the fuzzing campaigns (tests/fuzz). Made at test time; nothing here is committed.
#include <iostream>
#include <sys/stat.h>

#include "fixture.h"
#include "reproducers.h"

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::cerr << "usage: pt2rt_make_reproducers <dir>\n";
    return 2;
  }
  const std::string dir = argv[1];
  for (size_t slash = dir.find('/', 1); slash != std::string::npos; slash = dir.find('/', slash + 1)) {
    ::mkdir(dir.substr(0, slash).c_str(), 0755);  // parents, as mkdir -p
  }
  ::mkdir(dir.c_str(), 0755);
  for (const auto& [name, bytes] : pt2rt::test::all_reproducers()) {
    pt2rt::test::write_file(dir + "/" + name, bytes);
    std::cout << name << " " << bytes.size() << " bytes\n";
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "pt2rt_make_reproducers: " << e.what() << "\n";
  return 1;
}
