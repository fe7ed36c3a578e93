// --pprof DIR (docs/watch.md, "Profiles"): a process's call-site survivors at its first and last
// measured block ends as pprof profiles (profile.proto, gzip), so that
// `go tool pprof -diff_base first.pb.gz last.pb.gz` shows what grew, and what grew as collapsed
// stacks (growing.folded, "outer;...;inner BYTES") for flame graph tools. Each sample is a call
// site with the callers of its first allocation (FRAME records), innermost first; sample values
// are inuse_objects and inuse_space, exact (the preload's per-site books), not sampled.
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "internal.h"
#include "leakbound/harness/verdict.h"

namespace leakbound::watch::detail {
namespace {

// The few protobuf encodings profile.proto needs.
class Proto {
 public:
  void Varint(std::uint64_t v) {
    while (v >= 0x80) {
      bytes_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    bytes_ += static_cast<char>(v);
  }
  void Field(int field, std::uint64_t v) {  // wire type 0
    Varint(static_cast<std::uint64_t>(field) << 3);
    Varint(v);
  }
  void Bytes(int field, const std::string &data) {  // wire type 2
    Varint((static_cast<std::uint64_t>(field) << 3) | 2);
    Varint(data.size());
    bytes_ += data;
  }
  void Packed(int field, const std::vector<std::uint64_t> &values) {
    Proto inner;
    for (std::uint64_t v : values) inner.Varint(v);
    Bytes(field, inner.bytes_);
  }
  const std::string &bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

struct SiteAt {
  std::uint64_t bytes = 0, allocations = 0;
};

// Every site's survivors after the sample at `end` (the updates that apply up to it).
std::map<std::uint32_t, SiteAt> SitesAt(const WatchRecording &recording, int end) {
  std::map<std::uint32_t, SiteAt> at;
  for (const SiteUpdate &u : recording.site_updates) {
    if (u.before_sample > static_cast<size_t>(end)) break;
    at[u.site] = {u.bytes, u.allocations};
  }
  return at;
}

// A site's stack, innermost first: the site, then the callers of its first allocation, then the
// Python line of its surviving samples.
std::vector<std::string> StackOf(const WatchRecording &recording, std::uint32_t site) {
  std::vector<std::string> stack;
  const auto name = recording.site_names.find(site);
  stack.push_back(name == recording.site_names.end() ? "site " + std::to_string(site)
                                                     : name->second);
  if (const auto frames = recording.site_frames.find(site); frames != recording.site_frames.end()) {
    for (const std::string &f : frames->second) {
      if (!f.empty()) stack.push_back(f);
    }
  }
  // The Python line its surviving samples came from, outermost: the user's code that ran it.
  if (const auto line = recording.site_python.find(site); line != recording.site_python.end()) {
    stack.push_back(kPythonFrame + line->second.where);
  }
  return stack;
}

class ProfileBuilder {
 public:
  ProfileBuilder(const WatchRecording &recording, Symbolizer &symbolizer)
      : recording_(recording), symbolizer_(symbolizer) {
    String("");  // index 0 is the empty string
  }

  std::string Build(const std::map<std::uint32_t, SiteAt> &sites) {
    Proto p;
    for (const auto &[type, unit] : {std::pair("inuse_objects", "count"),
                                     std::pair("inuse_space", "bytes")}) {
      Proto value_type;
      value_type.Field(1, String(type));
      value_type.Field(2, String(unit));
      p.Bytes(1, value_type.bytes());
    }
    for (const auto &[site, at] : sites) {
      if (at.bytes == 0 && at.allocations == 0) continue;
      Proto sample;
      std::vector<std::uint64_t> locations;
      for (const std::string &frame : StackOf(recording_, site)) locations.push_back(Location(frame));
      sample.Packed(1, locations);
      sample.Packed(2, {at.allocations, at.bytes});
      p.Bytes(2, sample.bytes());
    }
    Proto period_type;  // before the string table is written: its strings are in it
    period_type.Field(1, String("space"));
    period_type.Field(2, String("bytes"));
    p.Bytes(11, period_type.bytes());
    for (const std::string &location : locations_) p.Bytes(4, location);
    for (const std::string &function : functions_) p.Bytes(5, function);
    for (const std::string &s : strings_) p.Bytes(6, s);
    return p.bytes();
  }

 private:
  std::uint64_t String(const std::string &s) {
    const auto [it, added] = string_ids_.emplace(s, strings_.size());
    if (added) strings_.push_back(s);
    return it->second;
  }
  // One location (and function) per distinct frame; its address is a made-up id (pprof needs
  // none: the function and line say where).
  std::uint64_t Location(const std::string &frame) {
    const auto found = location_ids_.find(frame);
    if (found != location_ids_.end()) return found->second;
    const SiteFrame &f = symbolizer_.Resolve(frame);
    const std::uint64_t id = locations_.size() + 1;
    Proto function;
    function.Field(1, id);
    function.Field(2, String(f.function.empty() ? f.where : f.function));
    function.Field(3, String(f.where));
    function.Field(4, String(f.file));
    functions_.push_back(function.bytes());
    Proto line;
    line.Field(1, id);
    line.Field(2, static_cast<std::uint64_t>(f.line > 0 ? f.line : 0));
    Proto location;
    location.Field(1, id);
    location.Field(3, id);
    location.Bytes(4, line.bytes());
    locations_.push_back(location.bytes());
    location_ids_[frame] = id;
    return id;
  }

  const WatchRecording &recording_;
  Symbolizer &symbolizer_;
  std::vector<std::string> strings_, locations_, functions_;
  std::map<std::string, std::uint64_t> string_ids_, location_ids_;
};

std::string Gzipped(const std::string &data) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("pprof: zlib deflateInit2 failed");
  }
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef *>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int done = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (done != Z_STREAM_END) throw std::runtime_error("pprof: zlib deflate failed");
  return out;
}

}  // namespace

std::vector<std::string> FoldedStack(const WatchRecording &recording, std::uint32_t site,
                                     Symbolizer &symbolizer) {
  const std::vector<std::string> stack = StackOf(recording, site);
  std::vector<std::string> folded;
  for (auto frame = stack.rbegin(); frame != stack.rend(); ++frame) {
    const SiteFrame &f = symbolizer.Resolve(*frame);
    std::string name = f.function.empty() ? f.where : f.function;
    if (!f.file.empty() && f.line > 0) {
      name += ' ';
      name.append(f.file, f.file.rfind('/') + 1);
      name += ':';
      name += std::to_string(f.line);
    }
    for (char &c : name) {
      if (c == ';' || c == '\n') c = ',';  // the folded format's separators
    }
    folded.push_back(std::move(name));
  }
  return folded;
}

std::vector<std::pair<std::string, std::string>> Profiles(const WatchRecording &recording,
                                                          const harness::Trace &trace,
                                                          Symbolizer &symbolizer) {
  const std::vector<int> ends = harness::BlockEnds(
      harness::Schedule{trace.warmup_steps, trace.blocks, trace.steps_per_block});
  if (ends.empty()) return {};
  const auto first = SitesAt(recording, ends.front());
  const auto last = SitesAt(recording, ends.back());
  std::vector<std::pair<std::string, std::string>> files;
  files.emplace_back("first.pb.gz", Gzipped(ProfileBuilder(recording, symbolizer).Build(first)));
  files.emplace_back("last.pb.gz", Gzipped(ProfileBuilder(recording, symbolizer).Build(last)));
  // What grew, outermost frame first, one line per growing site.
  std::string folded;
  for (const auto &[site, at] : last) {
    const auto before = first.find(site);
    const std::uint64_t then = before == first.end() ? 0 : before->second.bytes;
    if (at.bytes <= then) continue;
    std::string line;
    for (const std::string &name : FoldedStack(recording, site, symbolizer)) {
      if (!line.empty()) line += ';';
      line += name;
    }
    folded += line + " " + std::to_string(at.bytes - then) + "\n";
  }
  files.emplace_back("growing.folded", folded);
  return files;
}

}  // namespace leakbound::watch::detail
