// loader/archive.cpp — Archive: open a model.pt2 zip with libzip, check it, read entries.
#include "pt2rt/archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "archive_internal.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/text.h"
#include "zip_layout.h"

namespace pt2rt {
namespace {

constexpr uint64_t kReadChunk = uint64_t{1} << 26;  // 64 MiB per zip_fread call
constexpr uint64_t kSmallEntryLimit = 256;          // archive_format / archive_version

std::string zip_error_text(zip_error_t* err) { return zip_error_strerror(err); }

/// Closes a libzip file handle on scope exit.
struct ZipFileCloser {
  zip_file_t* f;
  ~ZipFileCloser() {
    if (f != nullptr) zip_fclose(f);
  }
};

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

/// True when `rest` (what follows "weights/", "extra/" or "optimizer/") is a plain relative
/// path: non-empty components, none "." or "..", no backslash or control byte, at most 1024
/// bytes.
bool is_safe_relative_name(const std::string& rest) {
  if (rest.empty() || rest.size() > 1024) return false;
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t end = std::min(rest.find('/', start), rest.size());
    const std::string part = rest.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  for (const char ch : rest) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || c == '\\') return false;
  }
  return true;
}

/// The archive layout (archive.h): the three fixed entries, weights/<name>, extra/<name> and
/// (schema 1.3) optimizer/<name>, the training state (pt2rt/training_state.h checks its content).
/// Anything else — absolute names, "../" components, names no pt2rt writer produces — is
/// refused at open, so no later step (Model::save copying entries, a tool extracting them)
/// can be led outside the archive's own namespace.
void check_entry_name(const std::string& source, const std::string& name) {
  if (name == kArchiveFormatEntry || name == kArchiveVersionEntry || name == kProgramEntry) return;
  for (const char* prefix : {kWeightsPrefix, kExtraPrefix, kOptimizerPrefix}) {
    const std::string p = prefix;
    if (name.compare(0, p.size(), p) == 0 && is_safe_relative_name(name.substr(p.size()))) return;
  }
  throw FormatError(source + ": entry name " + quoted(name) +
                    " is outside the archive layout (archive_format, archive_version, "
                    "program.fb, weights/<name>, extra/<name>, optimizer/<name>; relative names "
                    "without '.', '..' or empty components)");
}

/// A zip that is not a pt2rt archive but another PyTorch file, by its entry names: a one-line
/// FormatError saying what it is and what pt2rt reads instead. Silent for anything else.
void refuse_known_foreign(const std::string& source, const std::vector<std::string>& names) {
  auto any = [&](const char* part) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return n.find(part) != std::string::npos;
    });
  };
  const bool pickled = any("data.pkl");
  std::string what;
  if (pickled && (any("/code/") || any("constants.pkl"))) {
    what = "a TorchScript archive (torch.jit.save)";
  } else if (pickled) {
    what = "a torch.save file (pickled tensors; export-cli takes those as --inputs or --data)";
  } else if (any("/archive_format") || any(".json") || any("/aotinductor/")) {
    what = "a zip that is not a pt2rt archive (a torch.export or AOTInductor package?)";
  } else {
    return;
  }
  throw FormatError(source + ": " + what + ", not a pt2rt archive — pt2rt reads archives "
                    "written by pt2rt.export (python -m pt2rt save, export-cli save)");
}

/// Major version of an archive_version string ("1", "1.2"); -1 when malformed.
long parse_major(const std::string& v) {
  if (v.empty() || v.size() > 32) return -1;
  size_t i = 0;
  long major = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    if (i >= 9) return -1;
    major = major * 10 + (v[i] - '0');
    ++i;
  }
  if (i == 0) return -1;
  for (; i < v.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(v[i])) && v[i] != '.') return -1;
  }
  return major;
}

// Closes the entry `closer` holds; libzip reports a CRC mismatch here.
void close_checked(ZipFileCloser& closer, const std::string& where) {
  zip_file_t* f = closer.f;
  closer.f = nullptr;
  const int rc = zip_fclose(f);
  if (rc != 0) {
    zip_error_t err;
    zip_error_init_with_code(&err, rc);
    const std::string text = zip_error_strerror(&err);
    zip_error_fini(&err);
    throw FormatError(where + ": " + text);
  }
}

// Reads exactly `size` bytes of entry `idx` into `dst`, then checks that the entry ends
// there; the extra read makes libzip verify the CRC-32. Caller holds the mutex.
void read_entry_locked(const Archive::Impl& impl, uint64_t idx, void* dst, uint64_t size) {
  const std::string& name = impl.entries[idx].name;
  const std::string where = impl.source + ": entry '" + name + "'";
  zip_file_t* f = zip_fopen_index(impl.za, idx, 0);
  if (f == nullptr) {
    throw FormatError(where + ": cannot open for reading (libzip: " +
                      zip_strerror(impl.za) + ")");
  }
  ZipFileCloser closer{f};
  auto* out = static_cast<uint8_t*>(dst);
  // dst == nullptr: read and discard, 1 MiB at a time (the CRC check only)
  const uint64_t chunk = out != nullptr ? kReadChunk : uint64_t{1} << 20;
  std::vector<uint8_t> scratch(out != nullptr ? 0 : static_cast<size_t>(std::min(chunk, size)));
  uint64_t done = 0;
  while (done < size) {
    const uint64_t want = std::min(chunk, size - done);
    const zip_int64_t n = zip_fread(f, out != nullptr ? out + done : scratch.data(), want);
    if (n < 0) {
      throw FormatError(where + ": read failed after " + std::to_string(done) + " of " +
                        std::to_string(size) + " bytes (libzip: " + zip_file_strerror(f) + ")");
    }
    if (n == 0) {
      throw FormatError(where + ": short read, got " + std::to_string(done) + " of " +
                        std::to_string(size) + " bytes");
    }
    done += static_cast<uint64_t>(n);
  }
  uint8_t probe = 0;
  const zip_int64_t extra = zip_fread(f, &probe, 1);
  if (extra < 0) {
    throw FormatError(where + ": read failed at the end of its " + std::to_string(size) +
                      " bytes (libzip: " + zip_file_strerror(f) + ")");
  }
  if (extra > 0) {
    throw FormatError(where + ": holds more than its recorded " + std::to_string(size) +
                      " bytes");
  }
  close_checked(closer, where);
}

// Reads compressed entry `idx`, which declares `size` uncompressed bytes, into `out`, growing
// it in chunks of at most kGrowChunk bytes as data arrives; then checks, as read_entry_locked
// does, that exactly `size` bytes came (which also makes libzip verify the CRC-32).
void read_compressed_locked(const Archive::Impl& impl, uint64_t idx, uint64_t size,
                            std::vector<uint8_t>& out) {
  constexpr uint64_t kGrowChunk = uint64_t{1} << 20;
  const std::string where = impl.source + ": entry " + quoted(impl.entries[idx].name, 256);
  zip_file_t* f = zip_fopen_index(impl.za, idx, 0);
  if (f == nullptr) {
    throw FormatError(where + ": cannot open for reading (libzip: " + zip_strerror(impl.za) + ")");
  }
  ZipFileCloser closer{f};
  uint64_t done = 0;
  while (true) {
    // One byte past the declared size is requested to detect an entry that holds more.
    const uint64_t want = std::min(kGrowChunk, size + 1 - done);
    out.resize(static_cast<size_t>(done + want));
    const zip_int64_t n = zip_fread(f, out.data() + done, want);
    if (n < 0) {
      throw FormatError(where + ": read failed after " + std::to_string(done) + " of " +
                        std::to_string(size) + " bytes (libzip: " + zip_file_strerror(f) + ")");
    }
    done += static_cast<uint64_t>(n);
    if (done > size) {
      throw FormatError(where + ": holds more than its recorded " + std::to_string(size) +
                        " bytes");
    }
    if (n == 0) break;
  }
  if (done != size) {
    throw FormatError(where + ": short read, got " + std::to_string(done) + " of " +
                      std::to_string(size) + " bytes");
  }
  out.resize(static_cast<size_t>(done));
  close_checked(closer, where);
}

std::string read_small_entry(const Archive::Impl& impl, const char* name) {
  auto it = impl.index.find(name);
  if (it == impl.index.end()) {
    throw FormatError(impl.source + ": missing entry '" + name +
                      "' (not a pt2rt archive; expected archive_format \"" + kArchiveFormat +
                      "\")");
  }
  const EntryInfo& e = impl.entries[it->second];
  if (e.size > kSmallEntryLimit) {
    throw FormatError(impl.source + ": entry '" + name + "' is " + std::to_string(e.size) +
                      " bytes, more than the " + std::to_string(kSmallEntryLimit) +
                      " allowed");
  }
  std::string out(static_cast<size_t>(e.size), '\0');
  read_entry_locked(impl, it->second, out.data(), e.size);
  return out;
}

/// Copies the data offsets of the central-directory walk into the entries, after checking
/// that the walk and libzip agree entry by entry.
void attach_layout(Archive::Impl& impl, const std::vector<detail::ZipLayoutEntry>& layout) {
  auto& entries = impl.entries;
  if (layout.size() != entries.size()) {
    throw FormatError(impl.source + ": central directory walk found " +
                      std::to_string(layout.size()) + " entries, libzip " +
                      std::to_string(entries.size()));
  }
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].name != entries[i].name || layout[i].method != entries[i].method ||
        layout[i].compressed_size != entries[i].compressed_size) {
      throw FormatError(impl.source + ": entry " + std::to_string(i) + " " +
                        quoted(entries[i].name) +
                        " disagrees between the central directory walk and libzip");
    }
    entries[i].data_offset = layout[i].data_offset;
  }
}

// Opens a libzip archive over `src` (which it then owns, or frees on failure). `zip_start`:
// the data begins with a zip local file header ("PK\3\4").
// @throws FormatError naming `source`: not a zip (or a truncated one), or libzip cannot read it.
zip_t* open_zip_source(zip_source_t* src, zip_error_t* err, const std::string& source,
                       bool zip_start) {
  zip_t* za = zip_open_from_source(src, ZIP_RDONLY, err);
  if (za == nullptr) {
    const int code = zip_error_code_zip(err);
    const std::string text = zip_error_text(err);
    zip_error_fini(err);
    zip_source_free(src);
    // A cut-off archive: libzip < 1.10 says ZIP_ER_NOZIP; 1.10 and later ZIP_ER_TRUNCATED_ZIP,
    // or ZIP_ER_INCONS when the cut leaves part of the end-of-central-directory record.
    bool truncated = code == ZIP_ER_NOZIP || code == ZIP_ER_INCONS;
#ifdef ZIP_ER_TRUNCATED_ZIP
    truncated = truncated || code == ZIP_ER_TRUNCATED_ZIP;
#endif
    if (truncated && zip_start) {
      throw FormatError(source + ": truncated or damaged zip archive: it starts like one, but "
                        "its central directory (at the end of the file) is missing or damaged "
                        "— an interrupted copy or download? (libzip: " + text + ")");
    }
    throw FormatError(source + ": " +
                      (code == ZIP_ER_NOZIP ? "not a zip archive" : "cannot open as a zip archive") +
                      " (libzip: " + text + ")");
  }
  zip_error_fini(err);
  return za;
}

}  // namespace

Archive::Archive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Archive::Archive(Archive&&) noexcept = default;
Archive& Archive::operator=(Archive&&) noexcept = default;
Archive::~Archive() = default;

Archive Archive::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused below);
  // it has no effect on regular files.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw FormatError(path + ": cannot open (" + std::strerror(errno) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FormatError(path + ": not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw FormatError(path + ": not a zip archive (empty file)");
  }
  FILE* fp = ::fdopen(fd, "rb");
  if (fp == nullptr) {
    ::close(fd);
    throw FormatError(path + ": cannot open (" + std::strerror(errno) + ")");
  }
  char head[4] = {};
  const bool zip_start = ::pread(fd, head, sizeof head, 0) == sizeof head &&
                         std::memcmp(head, "PK\3\4", 4) == 0;
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_filep_create(fp, 0, -1, &err);  // owns fp from here on
  if (src == nullptr) {
    std::fclose(fp);
    const std::string text = zip_error_text(&err);
    zip_error_fini(&err);
    throw FormatError(path + ": cannot open (libzip: " + text + ")");
  }
  zip_t* za = open_zip_source(src, &err, path, zip_start);
  auto impl = std::make_unique<Impl>();
  impl->source = path;
  impl->size = static_cast<uint64_t>(st.st_size);
  impl->za = za;
  // The file stays open (libzip holds it) for the archive's lifetime; walk its layout now.
  std::vector<detail::ZipLayoutEntry> layout;
  try {
    layout = detail::read_zip_layout(static_cast<uint64_t>(st.st_size), detail::read_at_fd(fd));
  } catch (const detail::ZipLayoutError& e) {
    throw FormatError(path + ": malformed zip structure: " + e.what());
  }
  auto archive = open_source(std::move(impl));
  attach_layout(*archive.impl_, layout);
  return archive;
}

Archive Archive::from_bytes(const uint8_t* data, size_t size) {
  static const std::string kMemory = "<memory>";
  if (size == 0) throw FormatError(kMemory + ": not a zip archive (empty buffer)");
  if (data == nullptr) throw FormatError(kMemory + ": null buffer");
  auto impl = std::make_unique<Impl>();
  impl->source = kMemory;
  impl->bytes.assign(data, data + size);
  const uint8_t* bytes = impl->bytes.data();  // before impl is moved (argument order)
  return open_buffer(std::move(impl), bytes, size);
}

Archive Archive::open_mapped(std::shared_ptr<const MappedFile> file) {
  if (!file) throw FormatError("<mapping>: null mapped file");
  if (file->size() == 0) throw FormatError(file->path() + ": not a zip archive (empty file)");
  auto impl = std::make_unique<Impl>();
  impl->source = file->path();
  impl->mapping = std::move(file);
  const uint8_t* data = impl->mapping->data();  // before impl is moved (argument order)
  const size_t size = impl->mapping->size();
  return open_buffer(std::move(impl), data, size);
}

// Opens the zip held in `data` (owned by `impl`: its copy or its mapping) without copying it.
Archive Archive::open_buffer(std::unique_ptr<Impl> impl, const uint8_t* data, size_t size) {
  const std::string source = impl->source;
  impl->size = size;
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(data, size, 0, &err);
  if (src == nullptr) {
    const std::string text = zip_error_text(&err);
    zip_error_fini(&err);
    throw FormatError(source + ": cannot open (libzip: " + text + ")");
  }
  impl->za = open_zip_source(src, &err, source,
                             size >= 4 && std::memcmp(data, "PK\3\4", 4) == 0);
  std::vector<detail::ZipLayoutEntry> layout;
  try {
    layout = detail::read_zip_layout(size, detail::read_at_memory(data, size));
  } catch (const detail::ZipLayoutError& e) {
    throw FormatError(source + ": malformed zip structure: " + e.what());
  }
  auto archive = open_source(std::move(impl));
  attach_layout(*archive.impl_, layout);
  return archive;
}

// Lists the entries (rejecting duplicate names), then checks archive_format,
// archive_version and the presence of program.fb.
Archive Archive::open_source(std::unique_ptr<Impl> impl) {
  const std::string& src = impl->source;
  const zip_int64_t n = zip_get_num_entries(impl->za, 0);
  if (n < 0) throw FormatError(src + ": cannot count zip entries");
  if (zip_name_locate(impl->za, kArchiveFormatEntry, 0) < 0) {
    // No archive_format: say what the file is when it is another PyTorch file.
    std::vector<std::string> names;
    for (zip_int64_t i = 0; i < n && i < 64; ++i) {
      const char* name = zip_get_name(impl->za, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
      if (name != nullptr) names.emplace_back(name);
    }
    refuse_known_foreign(src, names);
  }
  impl->entries.reserve(static_cast<size_t>(n));
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(impl->za, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW, &st) != 0 ||
        (st.valid & ZIP_STAT_NAME) == 0 || (st.valid & ZIP_STAT_SIZE) == 0 ||
        (st.valid & ZIP_STAT_COMP_SIZE) == 0 || (st.valid & ZIP_STAT_COMP_METHOD) == 0) {
      throw FormatError(src + ": cannot read the central directory record of entry " +
                        std::to_string(i) + " (libzip: " + zip_strerror(impl->za) + ")");
    }
    EntryInfo e;
    e.name = st.name;
    check_entry_name(src, e.name);
    e.size = st.size;
    e.compressed_size = st.comp_size;
    e.method = st.comp_method;
    e.stored = st.comp_method == ZIP_CM_STORE;
    e.crc = (st.valid & ZIP_STAT_CRC) ? st.crc : 0;
    if (e.stored && e.size != e.compressed_size) {
      throw FormatError(src + ": entry " + quoted(e.name) + " is STORED but records " +
                        std::to_string(e.size) + " bytes and " +
                        std::to_string(e.compressed_size) + " stored bytes");
    }
    auto [it, inserted] = impl->index.emplace(e.name, static_cast<uint64_t>(i));
    if (!inserted) {
      throw FormatError(src + ": duplicate entry name " + quoted(e.name) + " (entries " +
                        std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
    impl->entries.push_back(std::move(e));
  }

  const std::string format = trim(read_small_entry(*impl, kArchiveFormatEntry));
  if (format != kArchiveFormat) {
    throw FormatError(src + ": archive_format is " + quoted(format) + ", expected '" +
                      kArchiveFormat + "' (not a pt2rt archive" +
                      (format == "pt2" ? ": a torch.export archive, torch.export.save; pt2rt "
                                         "reads archives written by pt2rt.export)"
                                       : ")"));
  }
  const std::string version = trim(read_small_entry(*impl, kArchiveVersionEntry));
  const long major = parse_major(version);
  const long known = parse_major(kArchiveVersion);
  if (major < 0) {
    throw FormatError(src + ": archive_version " + quoted(version) +
                      " is not a version number (this reader knows archive version " +
                      kArchiveVersion + ")");
  }
  if (major != known) {
    throw FormatError(src + ": archive_version " + quoted(version) + " (major " +
                      std::to_string(major) + ") is " +
                      (major > known ? "newer than" : "unknown to") +
                      " this reader, which knows archive version " + kArchiveVersion);
  }
  if (impl->index.count(kProgramEntry) == 0) {
    throw FormatError(src + ": missing entry '" + kProgramEntry + "'");
  }
  return Archive(std::move(impl));
}

const std::string& Archive::source() const { return impl_->source; }
uint64_t Archive::size() const { return impl_->size; }
const std::vector<EntryInfo>& Archive::entries() const { return impl_->entries; }
bool Archive::has_entry(const std::string& name) const { return impl_->index.count(name) != 0; }

const EntryInfo& Archive::entry(const std::string& name) const {
  auto it = impl_->index.find(name);
  if (it == impl_->index.end()) {
    throw FormatError(impl_->source + ": missing entry " + quoted(name, 256));
  }
  return impl_->entries[it->second];
}

std::vector<uint8_t> Archive::read(const std::string& name, uint64_t max_size) const {
  const EntryInfo& e = entry(name);
  if (e.size > max_size) {
    throw FormatError(impl_->source + ": entry " + quoted(name, 256) + " is " +
                      std::to_string(e.size) + " bytes, more than the limit of " +
                      std::to_string(max_size));
  }
  if (e.size > static_cast<uint64_t>(SIZE_MAX) / 2) {
    throw FormatError(impl_->source + ": entry " + quoted(name, 256) + " is too large to read (" +
                      std::to_string(e.size) + " bytes)");
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  const uint64_t idx = impl_->index.at(name);
  if (e.stored) {
    // A STORED entry's data lies inside the file (checked at open): its declared size is
    // bounded by the file's, so the buffer can be allocated up front.
    std::vector<uint8_t> out(static_cast<size_t>(e.size));
    read_entry_locked(*impl_, idx, out.data(), e.size);
    return out;
  }
  // A compressed entry may declare any uncompressed size (up to max_size) whatever its
  // compressed bytes hold: grow the buffer only as inflated data actually arrives.
  std::vector<uint8_t> out;
  read_compressed_locked(*impl_, idx, e.size, out);
  return out;
}

const std::shared_ptr<const MappedFile>& Archive::mapping() const { return impl_->mapping; }

const uint8_t* Archive::mapped_entry(const std::string& name) const {
  const EntryInfo& e = entry(name);
  if (!impl_->mapping) return nullptr;
  if (!e.stored) {
    throw FormatError(impl_->source + ": entry " + quoted(name, 256) +
                      " is compressed (zip method " + std::to_string(e.method) +
                      "); only STORED entries can be used in place");
  }
  const uint64_t file_size = impl_->mapping->size();
  if (e.data_offset > file_size || e.size > file_size - e.data_offset) {
    throw FormatError(impl_->source + ": entry " + quoted(name, 256) + ": data [" +
                      std::to_string(e.data_offset) + ", +" + std::to_string(e.size) +
                      ") lies outside the mapped file of " + std::to_string(file_size) +
                      " bytes");
  }
  return impl_->mapping->data() + e.data_offset;
}

void Archive::check_entry(const std::string& name) const {
  const EntryInfo& e = entry(name);
  std::lock_guard<std::mutex> lock(impl_->mu);
  read_entry_locked(*impl_, impl_->index.at(name), nullptr, e.size);
}

void Archive::read_into(const std::string& name, void* dst, uint64_t size) const {
  const EntryInfo& e = entry(name);
  if (e.size != size) {
    throw FormatError(impl_->source + ": entry '" + name + "' has " + std::to_string(e.size) +
                      " bytes, expected " + std::to_string(size));
  }
  if (size > 0 && dst == nullptr) {
    throw FormatError(impl_->source + ": entry '" + name + "': null destination");
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  read_entry_locked(*impl_, impl_->index.at(name), dst, size);
}

}  // namespace pt2rt
