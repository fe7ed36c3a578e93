// Host resource, error types and the names of allocation roles and scopes.
#include "leakbound/runtime/memory_resource.h"

#include <cstdlib>
#include <new>
#include <sstream>
#include <string>

#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kValue: return "value";
    case Role::kGrad: return "grad";
    case Role::kWorkspace: return "workspace";
    case Role::kInput: return "input";
    case Role::kParameter: return "parameter";
    case Role::kParameterGrad: return "parameter-grad";
    case Role::kOptimizerState: return "optimizer-state";
    case Role::kScratch: return "scratch";
    case Role::kUser: return "user";
  }
  return "unknown";
}

const char* ScopeName(ScopeKind scope) {
  switch (scope) {
    case ScopeKind::kNone: return "none";
    case ScopeKind::kStep: return "step";
    case ScopeKind::kForward: return "forward";
    case ScopeKind::kManual: return "manual";
  }
  return "unknown";
}

namespace {
std::string OomMessage(std::size_t requested, const MemoryStats& s, const std::string& why) {
  std::ostringstream out;
  out << "out of memory: could not allocate " << requested << " bytes (" << why
      << "); live " << s.live_bytes << " bytes in " << s.live_allocations
      << " allocations, peak " << s.peak_bytes << " bytes";
  return out.str();
}
}  // namespace

OutOfMemoryError::OutOfMemoryError(std::size_t requested, const MemoryStats& stats,
                                   const std::string& why)
    : std::runtime_error(OomMessage(requested, stats, why)), requested_(requested), stats_(stats) {}

MemoryResource* RequireUpstream(MemoryResource* upstream, const char* adaptor) {
  if (upstream == nullptr) {
    throw NullUpstreamError(std::string(adaptor) +
                            ": the upstream resource is null; pass the resource this adaptor "
                            "wraps (e.g. CpuMemory().stats or another adaptor)");
  }
  return upstream;
}

void* HostResource::DoAllocate(std::size_t bytes, const AllocationTag&) {
  // aligned_alloc needs a size that is a multiple of the alignment; a zero-byte request still
  // gets a unique pointer so that every Allocate has a matching Deallocate.
  std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  if (rounded < bytes) throw OutOfMemoryError(bytes, {}, "size overflows when aligned");
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw OutOfMemoryError(bytes, {}, "host aligned_alloc failed");
  return p;
}

void HostResource::DoDeallocate(void* ptr, std::size_t) noexcept { std::free(ptr); }

}  // namespace leakbound::runtime
