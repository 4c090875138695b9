// pt2rt_fuzz_seeds <out> [archive.pt2 ...] — the seed corpora of the fuzzing campaigns, made at
// test time (nothing is committed):
//   <out>/archive/  every given archive (exported by the Python exporter at test time), the
//                   loader tests' fixture archive, and the hostile reproducers' archives;
//   <out>/program/  the program.fb of each of those archives (when STORED) and the hostile
//                   reproducers' bare programs.
#include <sys/stat.h>

#include <iostream>
#include <string>

#include "fixture.h"
#include "pt2rt/archive.h"
#include "pt2rt/constants.h"
#include "reproducers.h"

namespace {

void write(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  pt2rt::test::write_file(dir + "/" + name, bytes);
}

void add_program_of(const std::string& dir, const std::string& name,
                    const std::vector<uint8_t>& archive) {
  try {
    const pt2rt::Archive a = pt2rt::Archive::from_bytes(archive.data(), archive.size());
    if (a.has_entry(pt2rt::kProgramEntry) && a.entry(pt2rt::kProgramEntry).stored) {
      write(dir, name + ".fb", a.read(pt2rt::kProgramEntry, a.size()));
    }
  } catch (const std::exception&) {
    // a reproducer that is not even an archive: it is an archive seed only
  }
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::cerr << "usage: pt2rt_fuzz_seeds <out> [archive.pt2 ...]\n";
    return 2;
  }
  const std::string out = argv[1], archives = out + "/archive", programs = out + "/program";
  for (const std::string& d : {out, archives, programs}) ::mkdir(d.c_str(), 0755);
  size_t n_archives = 0, n_programs = 0;
  auto archive = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    write(archives, name, bytes);
    add_program_of(programs, name, bytes);
    ++n_archives;
  };
  archive("fixture.pt2", pt2rt::test::fixture_archive());
  for (const auto& [name, bytes] : pt2rt::test::all_reproducers()) {
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".fb") == 0) {
      write(programs, name, bytes);
      ++n_programs;
    } else {
      archive(name, bytes);
    }
  }
  for (int i = 2; i < argc; ++i) {
    const std::string path = argv[i];
    archive(path.substr(path.rfind('/') + 1), pt2rt::test::read_file(path));
  }
  std::cout << "seeds: " << n_archives << " archives, " << n_programs
            << " bare programs (+ the archives' programs) in " << out << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "pt2rt_fuzz_seeds: " << e.what() << "\n";
  return 1;
}
