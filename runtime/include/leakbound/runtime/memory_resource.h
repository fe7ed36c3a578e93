// Memory resources: every tensor byte of the runtime comes through a stack of these.
// A small base with a public non-virtual Allocate/Deallocate over private virtuals; leaf resources
// own memory (host for the CPU stub, cudaMalloc / cudaMallocAsync for CUDA) and adaptors wrap an
// upstream to add one concern each (statistics, tracking, fault injection).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace leakbound::runtime {

enum class DeviceKind : std::uint8_t { kCpu, kCuda };

// Why a buffer exists. Used to attribute outstanding allocations when something leaks.
enum class Role : std::uint8_t {
  kValue,           // a node value produced on the tape
  kGrad,            // gradient of a non-parameter node (tape-owned)
  kWorkspace,       // saved for backward, or op scratch
  kInput,           // host data copied onto the tape
  kParameter,       // parameter storage (persistent)
  kParameterGrad,   // parameter gradient (persistent)
  kOptimizerState,  // momentum, Adam moments (persistent)
  kScratch,         // explicit-release scratch outside any tape
  kUser,            // allocated by user code through the session
};
const char* RoleName(Role role);

// Which scope an allocation was made in.
enum class ScopeKind : std::uint8_t { kNone, kStep, kForward, kManual };
const char* ScopeName(ScopeKind scope);

// Carried with each allocation so the tracking adaptor can attribute leaks.
// `op` must point to a string with static storage duration (an op name literal).
struct AllocationTag {
  std::uint64_t session = 0;
  std::uint64_t step = 0;  // tape generation at allocation time
  const char* op = "";
  Role role = Role::kUser;
  ScopeKind scope = ScopeKind::kNone;
};

// One allocation to free: the pointer and the size that was passed to Allocate.
struct Block {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};

// The bytes of a batch of blocks.
inline std::int64_t TotalBytes(std::span<const Block> blocks) {
  std::int64_t bytes = 0;
  for (const Block& b : blocks) bytes += static_cast<std::int64_t>(b.bytes);
  return bytes;
}

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  MemoryResource() = default;
  MemoryResource(const MemoryResource&) = delete;
  MemoryResource& operator=(const MemoryResource&) = delete;

  // Returns at least `bytes` bytes (never null; bytes == 0 yields a valid unique pointer).
  // Throws OutOfMemoryError on failure.
  void* Allocate(std::size_t bytes, const AllocationTag& tag = {}) {
    return DoAllocate(bytes, tag);
  }
  // `bytes` must be the size passed to Allocate.
  void Deallocate(void* ptr, std::size_t bytes) noexcept { DoDeallocate(ptr, bytes); }
  // Frees several allocations of this resource, as a scope exit does with a whole tape. The
  // effect is that of Deallocate on each; adaptors override it to update their counters and
  // take their lock once per batch instead of once per block.
  void DeallocateMany(std::span<const Block> blocks) noexcept {
    if (!blocks.empty()) DoDeallocateMany(blocks);
  }
  DeviceKind device() const { return DoDevice(); }

 private:
  virtual void* DoAllocate(std::size_t bytes, const AllocationTag& tag) = 0;
  virtual void DoDeallocate(void* ptr, std::size_t bytes) noexcept = 0;
  virtual void DoDeallocateMany(std::span<const Block> blocks) noexcept {
    for (const Block& b : blocks) DoDeallocate(b.ptr, b.bytes);
  }
  virtual DeviceKind DoDevice() const = 0;
};

// Exact counters of one statistics adaptor (or one of its nested scopes).
struct MemoryStats {
  std::int64_t live_bytes = 0;
  std::int64_t live_allocations = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t allocation_count = 0;
  std::int64_t free_count = 0;
  std::int64_t total_bytes_allocated = 0;
};

// Raised when an allocation cannot be satisfied (a real failure or an injected one).
class OutOfMemoryError : public std::runtime_error {
 public:
  OutOfMemoryError(std::size_t requested, const MemoryStats& stats, const std::string& why);
  std::size_t requested_bytes() const { return requested_; }
  const MemoryStats& stats_at_failure() const { return stats_; }

 private:
  std::size_t requested_;
  MemoryStats stats_;
};

// For adaptors' constructors: returns `upstream`, or throws NullUpstreamError naming `adaptor`
// when it is null (an adaptor over nothing would crash on its first allocation).
MemoryResource* RequireUpstream(MemoryResource* upstream, const char* adaptor);

// The CPU stub's "device" memory: 64-byte aligned host memory.
class HostResource final : public MemoryResource {
 public:
  static constexpr std::size_t kAlignment = 64;

 private:
  void* DoAllocate(std::size_t bytes, const AllocationTag& tag) override;
  void DoDeallocate(void* ptr, std::size_t bytes) noexcept override;
  DeviceKind DoDevice() const override { return DeviceKind::kCpu; }
};

}  // namespace leakbound::runtime
