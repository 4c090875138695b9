// loader/archive_writer.cpp — atomic, 64-byte aligned archive writing (see archive_writer.h).
//
// libzip writes the archive through a zip_source_function over our own mkstemp file
// descriptor (TempFile below), so every byte goes straight to the temp file, the test hook
// can fail a write halfway, and we decide when to fsync and rename.
#include "pt2rt/archive_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "archive_internal.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "zip_layout.h"

namespace pt2rt {
namespace {

/// The mode a new file gets from open(..., 0666): 0666 & ~umask. The umask is read from
/// /proc/self/status ("Umask:", Linux >= 4.7) without changing it; elsewhere umask() is set
/// and restored at once.
mode_t new_file_mode() {
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned mask = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof(line), f) != nullptr) {
      found = std::sscanf(line, "Umask: %o", &mask) == 1;
    }
    std::fclose(f);
    if (found) return 0666 & ~static_cast<mode_t>(mask);
  }
  const mode_t mask = ::umask(022);
  ::umask(mask);
  return 0666 & ~mask;
}

constexpr uint16_t kAlignExtraId = 0xD935;  // Android zipalign: u16 alignment, then padding
constexpr uint64_t kLocalHeaderSize = 30;
constexpr uint64_t kExtraHeaderSize = 4;
constexpr uint64_t kAlignFieldMin = 2;         // the u16 alignment value
constexpr uint64_t kZip64LocalExtraSize = 20;  // id, len, u64 size, u64 compressed size

/// One entry of the archive being written: bytes in memory, or an entry of a source archive.
struct EntrySource {
  std::string name;
  uint64_t size = 0;
  const void* data = nullptr;  ///< when `from` is null
  zip_t* from = nullptr;       ///< source archive (its mutex is held by the caller)
  uint64_t from_index = 0;
};

/// State of the libzip write target: our temp file.
struct TempFile {
  int fd = -1;
  uint64_t write_pos = 0;
  uint64_t size = 0;
  uint64_t read_pos = 0;
  uint64_t written = 0;
  std::optional<uint64_t> fail_after;
  zip_error_t error;
};

zip_int64_t set_error(TempFile* t, int zip_code, int sys_code) {
  zip_error_set(&t->error, zip_code, sys_code);
  return -1;
}

bool pwrite_all(int fd, const uint8_t* p, uint64_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, static_cast<size_t>(std::min<uint64_t>(n, 1u << 30)),
                               static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

// The zip_source_callback of the temp file (libzip's "writable source" protocol).
zip_int64_t temp_file_callback(void* ud, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto* t = static_cast<TempFile*>(ud);
  switch (cmd) {
    case ZIP_SOURCE_SUPPORTS:
      return ZIP_SOURCE_SUPPORTS_WRITABLE;
    case ZIP_SOURCE_STAT: {
      auto* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &t->error);
      if (st == nullptr) return -1;
      zip_stat_init(st);
      st->valid |= ZIP_STAT_SIZE;
      st->size = t->size;
      return sizeof(*st);
    }
    case ZIP_SOURCE_OPEN:
      t->read_pos = 0;
      return 0;
    case ZIP_SOURCE_READ: {
      const uint64_t n = std::min<uint64_t>(len, t->size - std::min(t->read_pos, t->size));
      if (n == 0) return 0;
      const ssize_t r = ::pread(t->fd, data, static_cast<size_t>(n), static_cast<off_t>(t->read_pos));
      if (r < 0) return set_error(t, ZIP_ER_READ, errno);
      t->read_pos += static_cast<uint64_t>(r);
      return r;
    }
    case ZIP_SOURCE_CLOSE:
      return 0;
    case ZIP_SOURCE_SEEK: {
      const zip_int64_t p = zip_source_seek_compute_offset(t->read_pos, t->size, data, len, &t->error);
      if (p < 0) return -1;
      t->read_pos = static_cast<uint64_t>(p);
      return 0;
    }
    case ZIP_SOURCE_TELL:
      return static_cast<zip_int64_t>(t->read_pos);
    case ZIP_SOURCE_BEGIN_WRITE:
      if (::ftruncate(t->fd, 0) != 0) return set_error(t, ZIP_ER_WRITE, errno);
      t->write_pos = t->size = 0;
      return 0;
    case ZIP_SOURCE_WRITE: {
      const auto* p = static_cast<const uint8_t*>(data);
      uint64_t n = len;
      bool inject = false;
      if (t->fail_after && t->written + n > *t->fail_after) {
        n = *t->fail_after - std::min(*t->fail_after, t->written);
        inject = true;
      }
      if (!pwrite_all(t->fd, p, n, t->write_pos)) return set_error(t, ZIP_ER_WRITE, errno);
      t->write_pos += n;
      t->written += n;
      t->size = std::max(t->size, t->write_pos);
      if (inject) return set_error(t, ZIP_ER_WRITE, ENOSPC);
      return static_cast<zip_int64_t>(len);
    }
    case ZIP_SOURCE_SEEK_WRITE: {
      auto* args = ZIP_SOURCE_GET_ARGS(zip_source_args_seek_t, data, len, &t->error);
      if (args == nullptr) return -1;
      int64_t base = 0;
      switch (args->whence) {
        case SEEK_SET: base = 0; break;
        case SEEK_CUR: base = static_cast<int64_t>(t->write_pos); break;
        case SEEK_END: base = static_cast<int64_t>(t->size); break;
        default: return set_error(t, ZIP_ER_INVAL, 0);
      }
      int64_t pos = 0;
      if (__builtin_add_overflow(base, args->offset, &pos) || pos < 0) {
        return set_error(t, ZIP_ER_INVAL, 0);
      }
      t->write_pos = static_cast<uint64_t>(pos);
      return 0;
    }
    case ZIP_SOURCE_TELL_WRITE:
      return static_cast<zip_int64_t>(t->write_pos);
    case ZIP_SOURCE_COMMIT_WRITE:
      // Durability (fsync) and the rename come after our own layout check.
      if (::ftruncate(t->fd, static_cast<off_t>(t->size)) != 0) {
        return set_error(t, ZIP_ER_WRITE, errno);
      }
      return 0;
    case ZIP_SOURCE_ROLLBACK_WRITE:
    case ZIP_SOURCE_REMOVE:
    case ZIP_SOURCE_FREE:
      return 0;  // the temp file is removed by write_entries
    case ZIP_SOURCE_ERROR:
      return zip_error_to_data(&t->error, data, len);
    default:
      return set_error(t, ZIP_ER_OPNOTSUPP, 0);
  }
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// Temp files of a save to `<dir>/<base>` are `<dir>/.<base>.pt2rt-tmp-XXXXXX` (mkostemp):
/// the prefix names pt2rt, so remove_stale_temp_files never touches another program's files.
std::string temp_prefix(const std::string& base) { return "." + base + ".pt2rt-tmp-"; }

/// Removes the temp files that interrupted saves (a killed process, a power cut) left for
/// `<dir>/<base>`: names temp_prefix(base) followed by exactly six mkstemp characters,
/// regular files owned by this user, not symlinks, and not locked — a live save holds an
/// exclusive flock on its temp file from creation to rename, so a file whose lock this call can
/// take belongs to no running save. Best effort: a file that cannot be examined is left alone.
void remove_stale_temp_files(const std::string& dir, const std::string& base) {
  const std::string prefix = temp_prefix(base);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> candidates;
  while (const dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    bool ok = true;
    for (size_t i = prefix.size(); i < name.size(); ++i) {
      ok = ok && std::isalnum(static_cast<unsigned char>(name[i]));
    }
    if (ok) candidates.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : candidates) {
    const std::string full = dir + "/" + name;
    const int fd = ::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::unlink(full.c_str());
    }
    ::close(fd);  // releases the lock
  }
}

/// Removes the temp file (and closes its descriptor) unless released.
struct TempGuard {
  std::string path;
  int fd = -1;
  bool armed = true;
  ~TempGuard() {
    if (fd >= 0) ::close(fd);
    if (armed && !path.empty()) ::unlink(path.c_str());
  }
};

/// Discards an open zip_t unless released.
struct ZipGuard {
  zip_t* za = nullptr;
  ~ZipGuard() {
    if (za != nullptr) zip_discard(za);
  }
};

/// Bytes the local header of an entry takes before the alignment extra field.
uint64_t local_header_base(const EntrySource& e) {
  uint64_t n = kLocalHeaderSize + e.name.size();
  if (e.size >= 0xffffffffu) n += kZip64LocalExtraSize;  // libzip adds a zip64 extra field
  return n;
}

void write_entries(const std::string& path, const std::vector<EntrySource>& entries,
                   const WriteOptions& options) {
  const std::string where = "cannot write '" + path + "'";
  std::set<std::string> names;
  for (const EntrySource& e : entries) {
    if (e.name.empty() || e.name.size() > 0xffff) throw Error(where + ": invalid entry name");
    if (!names.insert(e.name).second) throw Error(where + ": duplicate entry name '" + e.name + "'");
  }

  const std::string dir = dir_of(path);
  remove_stale_temp_files(dir, base_of(path));
  std::string tmpl = dir + "/" + temp_prefix(base_of(path)) + "XXXXXX";
  TempGuard temp;
  temp.fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (temp.fd < 0) {
    throw Error(where + ": cannot create a temp file in '" + dir + "' (" + std::strerror(errno) + ")");
  }
  temp.path = tmpl;
  // Held until the descriptor is closed: tells remove_stale_temp_files this save is alive.
  if (::flock(temp.fd, LOCK_EX | LOCK_NB) != 0) {
    throw Error(where + ": cannot lock the temp file (" + std::string(std::strerror(errno)) + ")");
  }

  TempFile state;
  state.fd = temp.fd;
  state.fail_after = options.fail_after_bytes;
  zip_error_init(&state.error);
  struct ErrorFini {
    zip_error_t* e;
    ~ErrorFini() { zip_error_fini(e); }
  } fini{&state.error};

  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* target = zip_source_function_create(temp_file_callback, &state, &err);
  if (target == nullptr) {
    const std::string text = zip_error_strerror(&err);
    zip_error_fini(&err);
    throw Error(where + ": libzip: " + text);
  }
  ZipGuard zip;
  zip.za = zip_open_from_source(target, ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (zip.za == nullptr) {
    const std::string text = zip_error_strerror(&err);
    zip_error_fini(&err);
    zip_source_free(target);
    throw Error(where + ": libzip: " + text);
  }
  zip_error_fini(&err);

  // Add the entries in order; pad each local header so that the data lands on a boundary.
  std::vector<uint64_t> expected_offsets;
  uint64_t offset = 0;
  for (const EntrySource& e : entries) {
    zip_source_t* s = e.from ? zip_source_zip(zip.za, e.from, e.from_index, 0, 0, -1)
                             : zip_source_buffer(zip.za, e.data, e.size, 0);
    if (s == nullptr) {
      throw Error(where + ": entry '" + e.name + "': libzip: " + zip_strerror(zip.za));
    }
    const zip_int64_t idx = zip_file_add(zip.za, e.name.c_str(), s, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(s);
      throw Error(where + ": entry '" + e.name + "': libzip: " + zip_strerror(zip.za));
    }
    const uint64_t base = local_header_base(e) + kExtraHeaderSize + kAlignFieldMin;
    const uint64_t pad = (kDataAlignment - (offset + base) % kDataAlignment) % kDataAlignment;
    std::vector<uint8_t> field(kAlignFieldMin + pad, 0);
    field[0] = static_cast<uint8_t>(kDataAlignment & 0xff);
    field[1] = static_cast<uint8_t>(kDataAlignment >> 8);
    if (zip_set_file_compression(zip.za, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0) != 0 ||
        zip_file_extra_field_set(zip.za, static_cast<zip_uint64_t>(idx), kAlignExtraId,
                                 ZIP_EXTRA_FIELD_NEW, field.data(),
                                 static_cast<zip_uint16_t>(field.size()), ZIP_FL_LOCAL) != 0) {
      throw Error(where + ": entry '" + e.name + "': libzip: " + zip_strerror(zip.za));
    }
    const uint64_t data_offset = offset + base + pad;
    expected_offsets.push_back(data_offset);
    offset = data_offset + e.size;
  }

  if (zip_close(zip.za) != 0) {
    throw Error(where + ": libzip: " + zip_strerror(zip.za));  // ZipGuard discards it
  }
  zip.za = nullptr;  // zip_close freed it

  // Check what libzip wrote: same entries, STORED, data where predicted (64-byte aligned).
  std::vector<detail::ZipLayoutEntry> layout;
  try {
    layout = detail::read_zip_layout(state.size, detail::read_at_fd(temp.fd));
  } catch (const detail::ZipLayoutError& e) {
    throw Error(where + ": the written archive does not read back: " + e.what());
  }
  if (layout.size() != entries.size()) {
    throw Error(where + ": wrote " + std::to_string(layout.size()) + " entries, expected " +
                std::to_string(entries.size()));
  }
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].name != entries[i].name || layout[i].method != ZIP_CM_STORE ||
        layout[i].data_offset != expected_offsets[i] ||
        layout[i].data_offset % kDataAlignment != 0) {
      throw Error(where + ": entry '" + entries[i].name + "' landed at data offset " +
                  std::to_string(layout[i].data_offset) + " (method " +
                  std::to_string(layout[i].method) + "), expected STORED at " +
                  std::to_string(expected_offsets[i]) + " (a multiple of " +
                  std::to_string(kDataAlignment) + ")");
    }
  }

  // Keep the target's permissions; a new file gets what open() would give it (0666 & ~umask),
  // as the Python exporter's write_archive does.
  struct stat st {};
  const mode_t mode = ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : new_file_mode();
  if (::fchmod(temp.fd, mode) != 0 || ::fsync(temp.fd) != 0) {
    throw Error(where + ": cannot sync the temp file (" + std::strerror(errno) + ")");
  }
  // Renamed while still open, so its flock keeps remove_stale_temp_files away until then; the
  // data is already durable (fsync), so closing afterwards cannot lose it.
  if (::rename(temp.path.c_str(), path.c_str()) != 0) {
    throw Error(where + ": cannot rename the temp file over it (" + std::strerror(errno) + ")");
  }
  temp.armed = false;
  const int fd = temp.fd;
  temp.fd = -1;
  ::close(fd);
  // Make the rename durable. Best effort: some file systems refuse fsync on directories.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

void write_archive(const std::string& path, const std::vector<NewEntry>& entries,
                   const WriteOptions& options) {
  std::vector<EntrySource> sources;
  sources.reserve(entries.size());
  for (const NewEntry& e : entries) {
    if (e.bytes.data == nullptr && e.bytes.size > 0) {
      throw Error("cannot write '" + path + "': entry '" + e.name + "' has no data");
    }
    sources.push_back({e.name, e.bytes.size, e.bytes.data, nullptr, 0});
  }
  write_entries(path, sources, options);
}

void write_archive_copy(const std::string& path, const Archive& source,
                        const std::vector<NewEntry>& replacements, const WriteOptions& options) {
  std::vector<EntrySource> sources;
  std::set<std::string> used;
  auto find_replacement = [&](const std::string& name) -> const NewEntry* {
    for (const NewEntry& r : replacements) {
      if (r.name == name) return &r;
    }
    return nullptr;
  };
  std::set<std::string> replaced;
  for (const NewEntry& r : replacements) {
    if (r.bytes.data == nullptr && r.bytes.size > 0) {
      throw Error("cannot write '" + path + "': entry '" + r.name + "' has no data");
    }
    if (!replaced.insert(r.name).second) {
      throw Error("cannot write '" + path + "': entry '" + r.name + "' is replaced twice");
    }
  }
  zip_t* from = detail::ArchiveAccess::handle(source);
  for (const EntryInfo& e : source.entries()) {
    if (const NewEntry* r = find_replacement(e.name)) {
      sources.push_back({e.name, r->bytes.size, r->bytes.data, nullptr, 0});
      used.insert(e.name);
    } else if (std::any_of(options.omit_prefixes.begin(), options.omit_prefixes.end(),
                           [&](const std::string& p) { return e.name.rfind(p, 0) == 0; })) {
      continue;
    } else {
      // A compressed entry is inflated and written STORED: bound what that may cost before
      // a byte is written (a few KB of DEFLATE can declare and hold gigabytes).
      if (!e.stored && e.size > options.limits.max_entry_bytes) {
        throw Error("cannot write '" + path + "': entry '" + e.name + "' of '" + source.source() +
                    "' is compressed and inflates to " + std::to_string(e.size) +
                    " bytes, more than the limit of " +
                    std::to_string(options.limits.max_entry_bytes) +
                    " (ArchiveLimits::max_entry_bytes)");
      }
      sources.push_back({e.name, e.size, nullptr, from, detail::ArchiveAccess::index_of(source, e.name)});
    }
  }
  for (const NewEntry& r : replacements) {
    if (used.count(r.name) == 0) {
      sources.push_back({r.name, r.bytes.size, r.bytes.data, nullptr, 0});
      used.insert(r.name);
    }
  }
  std::lock_guard<std::mutex> lock(detail::ArchiveAccess::mutex(source));
  write_entries(path, sources, options);
}

}  // namespace pt2rt
