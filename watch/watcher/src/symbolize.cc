// Call-site names for the report: the preload names a site "PATH+0xOFFSET" (the return address
// of the allocation call, as an offset in its module); here, when the report is built, each one
// shown becomes "FUNCTION at FILE:LINE (MODULE+0xOFFSET)" with elfutils' libdw: function names
// from the symbol tables (demangled), file:line where the module has DWARF line tables (-g).
// Without libdw (not found at build time), or where a module cannot be read, the name stays
// "MODULE+0xOFFSET". Off the hot path: only names that appear in the report are looked up.
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "internal.h"

#if LEAKBOUND_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>
#include <zlib.h>
#endif

namespace leakbound::watch::detail {
namespace {

// "PATH+0xOFF" -> (PATH, OFF); false when the text is not of that form.
bool SplitSite(const std::string &name, std::string &path, std::uint64_t &offset) {
  const size_t plus = name.rfind("+0x");
  if (plus == std::string::npos || plus == 0) return false;
  char *end = nullptr;
  offset = std::strtoull(name.c_str() + plus + 3, &end, 16);
  if (end == name.c_str() + plus + 3 || *end != '\0') return false;
  path = name.substr(0, plus);
  return true;
}

// The frame of "PATH+0xOFF" before any lookup: its module and "MODULE+0xOFF"; `offset` 0 when
// the text is not of that form (then `where` is the text).
SiteFrame Unresolved(const std::string &site, std::uint64_t &offset) {
  SiteFrame f;
  offset = 0;
  if (!SplitSite(site, f.module_path, offset)) {
    f.module_path.clear();
    f.where = site;
    return f;
  }
  f.where = f.module_path.substr(f.module_path.rfind('/') + 1) + site.substr(site.rfind("+0x"));
  return f;
}

[[maybe_unused]] std::string Demangled(const char *symbol) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> plain(
      abi::__cxa_demangle(symbol, nullptr, nullptr, &status), &std::free);
  return status == 0 && plain ? std::string(plain.get()) : std::string(symbol);
}

// A source path as the report shows it: relative to the current directory when below it.
std::string Shown(const std::string &file) {
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  if (!ec && !cwd.empty()) {
    const std::string prefix = cwd.string() + "/";
    if (file.rfind(prefix, 0) == 0) return file.substr(prefix.size());
  }
  return file;
}

// A function's name without template arguments and parameters ("std::_Rb_tree::_M_insert"):
// enough to say which library function allocates.
std::string Short(const std::string &function) {
  std::string out;
  int angle = 0;
  for (size_t i = 0; i < function.size(); ++i) {
    const char c = function[i];
    if (c == '<') ++angle;
    if (angle == 0 && c == '(') break;
    if (angle == 0) out += c;
    if (c == '>' && angle > 0) --angle;
  }
  const size_t space = out.rfind(' ');  // a return type left in front
  return space == std::string::npos ? out : out.substr(space + 1);
}

// Library code rather than the user's: the compiler's and the system's headers.
bool IsSystemSource(const std::string &file) {
  return file.rfind("/usr/include/", 0) == 0 || file.rfind("/usr/lib/", 0) == 0 ||
         file.find("/c++/") != std::string::npos;
}

}  // namespace

#if LEAKBOUND_HAVE_LIBDW

// Whether the debug file open at `fd` belongs to the module: the same build ID when the module
// has one, else the CRC its .gnu_debuglink names.
bool DebugFileMatches(int fd, const unsigned char *id, int id_length, GElf_Word crc) {
  if (id_length > 0) {
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    const void *found = nullptr;
    const ssize_t found_length = elf ? dwelf_elf_gnu_build_id(elf, &found) : -1;
    const bool same = found_length == id_length && std::memcmp(found, id, id_length) == 0;
    if (elf) elf_end(elf);
    return same;
  }
  uLong sum = crc32(0L, Z_NULL, 0);
  unsigned char buffer[1 << 16];
  off_t at = 0;
  for (;;) {
    const ssize_t got = ::pread(fd, buffer, sizeof buffer, at);
    if (got < 0) return false;
    if (got == 0) break;
    sum = crc32(sum, buffer, static_cast<uInt>(got));
    at += got;
  }
  return static_cast<GElf_Word>(sum) == crc;
}

// Separate debug files on this machine only: by build ID under the debug directories
// (dwfl_build_id_find_debuginfo: what Debian's -dbg and -dbgsym packages install), then by the
// module's .gnu_debuglink name next to it, in its .debug/ and under /usr/lib/debug, taken only
// when it matches (DebugFileMatches); libdwfl asks here for a dwz multifile too (below). Not dwfl_standard_find_debuginfo: elfutils 0.188 ends that
// search with debuginfod, which dlopens libdebuginfod (curl, GnuTLS, Kerberos: ~35 libraries,
// 15-20 ms) for every module without a local debug file and, when DEBUGINFOD_URLS is set
// (Debian's /etc/profile.d sets it for login shells), fetches debug files over the network while
// watch writes its report: libtorch's are hundreds of MB. LEAKBOUND_DEBUGINFOD=1 asks for
// elfutils' own search, debuginfod included.
int FindLocalDebuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                       const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                       char **debuginfo_file_name) {
  const int by_id = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name,
                                                 debuglink_file, debuglink_crc,
                                                 debuginfo_file_name);
  if (by_id >= 0 || debuglink_file == nullptr || file_name == nullptr) return by_id;
  // The identity the file must have: the module's build ID, or, for the file of DWARF shared by
  // several modules that a dwz-compressed debug file names (.gnu_debugaltlink, an absolute path
  // in Debian's -dbgsym packages: libdwfl asks for it with CRC 0 once the module's DWARF is
  // open), the build ID that link gives. The guard keeps dwfl_module_getdwarf from asking for the
  // module's own debug file again from inside this search.
  static thread_local bool reading_alt_link = false;
  const unsigned char *id = nullptr;
  int id_length = 0;
  if (debuglink_crc == 0 && debuglink_file[0] == '/' && !reading_alt_link) {
    reading_alt_link = true;
    Dwarf_Addr bias = 0;
    Dwarf *dwarf = dwfl_module_getdwarf(mod, &bias);
    reading_alt_link = false;
    const char *alt_name = nullptr;
    const void *alt_id = nullptr;
    const ssize_t alt_length =
        dwarf ? dwelf_dwarf_gnu_debugaltlink(dwarf, &alt_name, &alt_id) : -1;
    if (alt_length > 0 && alt_name && std::strcmp(alt_name, debuglink_file) == 0) {
      id = static_cast<const unsigned char *>(alt_id);
      id_length = static_cast<int>(alt_length);
    }
  }
  if (id_length == 0) {
    GElf_Addr id_address = 0;
    id_length = dwfl_module_build_id(mod, &id, &id_address);
  }
  const std::filesystem::path module(file_name);
  const std::filesystem::path dir = module.parent_path();
  std::vector<std::filesystem::path> candidates;
  for (const std::filesystem::path &candidate :
       {dir / debuglink_file, dir / ".debug" / debuglink_file,
        std::filesystem::path("/usr/lib/debug") / dir.relative_path() / debuglink_file}) {
    // An absolute link is one path (operator/ keeps it whole); a link naming the module itself
    // is not its debug file.
    if (candidate != module &&
        std::find(candidates.begin(), candidates.end(), candidate) == candidates.end()) {
      candidates.push_back(candidate);
    }
  }
  for (const std::filesystem::path &candidate : candidates) {
    const int fd = ::open(candidate.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (DebugFileMatches(fd, id, id_length, debuglink_crc)) {
      *debuginfo_file_name = ::strdup(candidate.c_str());
      return fd;
    }
    ::close(fd);
  }
  return -1;
}

struct Symbolizer::Impl {
  Dwfl_Callbacks callbacks{};
  Dwfl *dwfl = nullptr;
  struct Module {
    Dwfl_Module *module = nullptr;
    Dwarf_Addr shift = 0;  // added to a module offset to give its address in `dwfl`
  };
  std::map<std::string, Module> modules;  // by path; a null module: could not be read
  char *debuginfo_path = nullptr;

  Impl() {
    callbacks.find_elf = dwfl_build_id_find_elf;
    const char *debuginfod = std::getenv("LEAKBOUND_DEBUGINFOD");
    callbacks.find_debuginfo = debuginfod && std::strcmp(debuginfod, "1") == 0
                                   ? dwfl_standard_find_debuginfo
                                   : FindLocalDebuginfo;
    callbacks.section_address = dwfl_offline_section_address;
    callbacks.debuginfo_path = &debuginfo_path;
    dwfl = dwfl_begin(&callbacks);
  }
  ~Impl() {
    if (dwfl) dwfl_end(dwfl);
  }

  const Module &Load(const std::string &path) {
    const auto found = modules.find(path);
    if (found != modules.end()) return found->second;
    Module m;
    if (dwfl && path.front() == '/') {
      dwfl_report_begin_add(dwfl);
      m.module = dwfl_report_offline(dwfl, path.c_str(), path.c_str(), -1);
      dwfl_report_end(dwfl, nullptr, nullptr);
    }
    if (m.module) {
      // The preload's offset is the address minus the load bias, i.e. an ELF virtual address;
      // libdw lays the module out from `low`, its first segment's address.
      Dwarf_Addr low = 0, bias = 0;
      dwfl_module_info(m.module, nullptr, &low, nullptr, nullptr, nullptr, nullptr, nullptr);
      Elf *elf = dwfl_module_getelf(m.module, &bias);
      GElf_Addr first = 0;
      size_t count = 0;
      if (elf && elf_getphdrnum(elf, &count) == 0) {
        for (size_t i = 0; i < count; ++i) {
          GElf_Phdr header;
          if (gelf_getphdr(elf, static_cast<int>(i), &header) && header.p_type == PT_LOAD) {
            first = header.p_vaddr & ~GElf_Addr{0xfff};
            break;
          }
        }
      }
      m.shift = low - first;
    }
    return modules.emplace(path, m).first->second;
  }

  SiteFrame Resolve(const std::string &site) {
    std::uint64_t offset = 0;
    SiteFrame f = Unresolved(site, offset);
    if (offset == 0) return f;
    const Module &m = Load(f.module_path);
    if (!m.module || offset == 0) return f;
    // A return address: the call is the instruction before it.
    const Dwarf_Addr address = m.shift + offset - 1;
    if (const char *function = dwfl_module_addrname(m.module, address)) {
      f.function = Demangled(function);
    }
    if (Dwfl_Line *l = dwfl_module_getsrc(m.module, address)) {
      if (const char *file = dwfl_lineinfo(l, nullptr, &f.line, nullptr, nullptr, nullptr)) {
        f.file = file;
      }
    }
    if (!f.file.empty() && IsSystemSource(f.file)) OutOfInlines(m.module, address, f);
    return f;
  }

  // When the line is in a system header (an inlined std::map insert), the location the inline
  // chain was called from, outermost first that is not: the user's line in the function the
  // library code was inlined into.
  static void OutOfInlines(Dwfl_Module *module, Dwarf_Addr address, SiteFrame &f) {
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(module, address, &bias);
    Dwarf_Files *files = nullptr;
    size_t file_count = 0;
    if (!cu || dwarf_getsrcfiles(cu, &files, &file_count) != 0) return;
    Dwarf_Die *scopes = nullptr;
    if (dwarf_getscopes(cu, address - bias, &scopes) <= 0) return;
    Dwarf_Die inlined = scopes[0];  // the innermost scope
    std::free(scopes);
    // Out from the innermost inlined call: each one's call site is a line of the function it
    // was inlined into (dwarf_getscopes_die gives that die and its enclosing scopes).
    for (int depth = 0; depth < 64 && dwarf_tag(&inlined) == DW_TAG_inlined_subroutine; ++depth) {
      Dwarf_Die *chain = nullptr;
      const int n = dwarf_getscopes_die(&inlined, &chain);
      if (n <= 0) return;
      int outer = -1;  // the next enclosing inlined or real function
      for (int k = 1; k < n && outer < 0; ++k) {
        const int tag = dwarf_tag(&chain[k]);
        if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) outer = k;
      }
      Dwarf_Attribute attribute;
      Dwarf_Word file_index = 0, line = 0;
      const char *file = nullptr;
      if (dwarf_formudata(dwarf_attr(&inlined, DW_AT_call_file, &attribute), &file_index) == 0 &&
          dwarf_formudata(dwarf_attr(&inlined, DW_AT_call_line, &attribute), &line) == 0) {
        file = dwarf_filesrc(files, file_index, nullptr, nullptr);
      }
      if (file && !IsSystemSource(file)) {
        f.file = file;
        f.line = static_cast<int>(line);
        if (outer >= 0) {
          const char *linkage = nullptr;
          if (dwarf_attr_integrate(&chain[outer], DW_AT_linkage_name, &attribute)) {
            linkage = dwarf_formstring(&attribute);
          }
          Dwarf_Die *die = &chain[outer];
          const char *name = linkage ? linkage : dwarf_diename(die);
          if (!name && dwarf_attr_integrate(die, DW_AT_name, &attribute)) {
            name = dwarf_formstring(&attribute);
          }
          if (name) f.function = Demangled(name);
        }
        std::free(chain);
        return;
      }
      if (outer < 0) {
        std::free(chain);
        return;
      }
      inlined = chain[outer];
      std::free(chain);
    }
  }
};

#else

struct Symbolizer::Impl {
  SiteFrame Resolve(const std::string &site) {
    std::uint64_t offset = 0;
    return Unresolved(site, offset);
  }
};

#endif

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;

namespace {

// "FILE:LINE in FUNCTION", as the leakbound module writes a Python line.
SiteFrame PythonFrame(const std::string &where) {
  SiteFrame f;
  f.where = "python";
  const size_t in = where.rfind(" in ");
  std::string file_line = where.substr(0, in);
  if (in != std::string::npos) f.function = where.substr(in + 4);
  const size_t colon = file_line.rfind(':');
  if (colon != std::string::npos) {
    f.line = std::atoi(file_line.c_str() + colon + 1);
    file_line.resize(colon);
  }
  f.file = file_line;
  return f;
}

}  // namespace

const SiteFrame &Symbolizer::Resolve(const std::string &site) {
  const auto cached = frames_.find(site);
  if (cached != frames_.end()) return cached->second;
  if (site.rfind(kPythonFrame, 0) == 0) {
    return frames_[site] = PythonFrame(site.substr(std::strlen(kPythonFrame)));
  }
  if (site.rfind(kScannedFrame, 0) == 0) {
    SiteFrame scanned = Resolve(site.substr(std::strlen(kScannedFrame)));
    scanned.where += ", by stack scan";
    return frames_[site] = std::move(scanned);
  }
  return frames_[site] = impl_->Resolve(site);
}

std::string SiteFrame::Display() const {
  std::string out = function;
  if (!file.empty() && line > 0) out += (out.empty() ? "" : " at ") + Shown(file) + ":" + std::to_string(line);
  return out.empty() ? where : out + " (" + where + ")";
}

bool SiteFrame::User() const {
  if (module_path.empty() || module_path.front() != '/') return false;
  static const char *const kSystem[] = {"/usr/lib", "/lib", "/usr/bin", "/bin", "/usr/sbin",
                                        "/sbin", "/usr/libexec", "/usr/local/lib/python"};
  for (const char *prefix : kSystem) {
    if (module_path.rfind(prefix, 0) == 0) return false;
  }
  const std::string name = module_path.substr(module_path.rfind('/') + 1);
  if (name.rfind("libleakbound_", 0) == 0) return false;  // watch's own
  if (module_path.find("/site-packages/") != std::string::npos ||
      module_path.find("/dist-packages/") != std::string::npos) {
    return false;
  }
  return file.empty() || !IsSystemSource(file);
}

std::string Symbolizer::Attribute(const std::string &site, const std::vector<std::string> &callers,
                                  const WatchRecording::PythonLine *python) {
  const SiteFrame &at = Resolve(site);
  if (at.User()) return at.Display();
  const std::string allocating =
      at.function.empty() ? at.where : Short(at.function) + " (" + at.where + ")";
  for (const std::string &caller : callers) {
    const SiteFrame &frame = Resolve(caller);
    if (!frame.User()) continue;
    return frame.Display() + ", allocating in " + allocating;
  }
  if (python != nullptr && !python->where.empty()) {
    const SiteFrame &line = Resolve(kPythonFrame + python->where);
    return (line.function.empty() ? "" : line.function + " at ") + Shown(line.file) + ":" +
           std::to_string(line.line) + " (Python: " + std::to_string(python->live_here) + " of " +
           std::to_string(python->live) + " live samples), allocating in " + allocating;
  }
  return at.Display();
}

}  // namespace leakbound::watch::detail
