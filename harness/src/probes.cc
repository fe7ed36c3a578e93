// Probes of the CPU stub. Sample() runs after every step, so it stays allocation-free.
#include "leakbound/harness/probes.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdlib>

#include "leakbound/watch/heap.h"

// Under ASan/TSan malloc is the sanitizer's allocator and mallinfo2 reports nothing; the
// sanitizer's own exact count of allocated heap bytes takes its place.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Declared here: GCC ships the function in libasan/libtsan but not its header.
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#define LEAKBOUND_SANITIZER_HEAP 1
#endif

namespace leakbound::harness {

RuntimeAllocatorProbe::RuntimeAllocatorProbe(runtime::Device device)
    : device_(device),
      counters_{{"runtime.live_bytes", "bytes", true, true},
                {"runtime.live_allocations", "count", true, true},
                {"runtime.peak_bytes", "bytes", true, false, false, "runtime.live_bytes"},
                {"runtime.allocation_count", "count", true, false}} {}

void RuntimeAllocatorProbe::Sample(std::vector<double>& out) {
  const runtime::MemoryStats s = runtime::ProcessStats(device_);
  out.push_back(static_cast<double>(s.live_bytes));
  out.push_back(static_cast<double>(s.live_allocations));
  out.push_back(static_cast<double>(s.peak_bytes));
  out.push_back(static_cast<double>(s.allocation_count));
}

TrackingProbe::TrackingProbe(SessionsFn sessions)
    : sessions_(std::move(sessions)),
      counters_{{"tracking.outstanding_allocations", "count", true, true},
                {"tracking.unknown_frees", "count", true, true},
                {"tracking.size_mismatches", "count", true, true}} {}

void TrackingProbe::Sample(std::vector<double>& out) {
  double outstanding = 0, unknown_frees = 0, size_mismatches = 0;
  for (runtime::EagerSession* s : sessions_()) {
    if (s != nullptr && s->tracking() != nullptr) {
      outstanding += static_cast<double>(s->tracking()->outstanding_count());
      unknown_frees += static_cast<double>(s->tracking()->unknown_frees());
      size_mismatches += static_cast<double>(s->tracking()->size_mismatches());
    }
  }
  out.push_back(outstanding);
  out.push_back(unknown_frees);
  out.push_back(size_mismatches);
}

HostProcessProbe::HostProcessProbe()
    : statm_fd_(::open("/proc/self/statm", O_RDONLY | O_CLOEXEC)),
      page_size_(::sysconf(_SC_PAGESIZE)),
      heap_active_(leakbound_heap_active() != 0) {
  // The interposer's counters are exact and judged as such; without it (a binary that does not
  // link it) host.heap_bytes falls back to the allocator's own noisy figure.
  if (heap_active_) {
    counters_ = {{"host.heap_bytes", "bytes", true, true},
                 {"host.heap_allocations", "count", true, true},
                 {"host.heap_peak_bytes", "bytes", true, false, false, "host.heap_bytes"},
                 {"host.malloc_arena_bytes", "bytes", false, true},
                 {"host.rss_bytes", "bytes", false, false}};
  } else {
    counters_ = {{"host.heap_bytes", "bytes", false, true}, {"host.rss_bytes", "bytes", false, false}};
  }
}

HostProcessProbe::~HostProcessProbe() {
  if (statm_fd_ >= 0) ::close(statm_fd_);
}

std::string HostProcessProbe::State() const {
  if (!heap_active_) {
    return std::string("partly unavailable: exact heap ") + leakbound_heap_state() +
           " (host.heap_bytes is the allocator's noisy figure)";
  }
  return statm_fd_ >= 0 ? "active" : "partly unavailable: /proc/self/statm cannot be read";
}

void HostProcessProbe::Sample(std::vector<double>& out) {
#if defined(LEAKBOUND_SANITIZER_HEAP)
  const double arena = static_cast<double>(__sanitizer_get_current_allocated_bytes());
#else
  const struct mallinfo2 info = ::mallinfo2();
  const double arena = static_cast<double>(info.uordblks + info.hblkhd);
#endif
  if (heap_active_) {
    leakbound_heap_stats stats;
    leakbound_heap_read(&stats);
    out.push_back(static_cast<double>(stats.live_bytes));
    out.push_back(static_cast<double>(stats.live_allocations));
    out.push_back(static_cast<double>(stats.peak_bytes));
  }
  out.push_back(arena);
  double rss = 0;
  if (statm_fd_ >= 0) {
    char text[128];
    const ssize_t n = ::pread(statm_fd_, text, sizeof(text) - 1, 0);
    if (n > 0) {
      text[n] = '\0';
      char* end = nullptr;
      std::strtoull(text, &end, 10);                         // size
      const unsigned long long resident = std::strtoull(end, nullptr, 10);
      rss = static_cast<double>(resident) * static_cast<double>(page_size_);
    }
  }
  out.push_back(rss);
}

std::vector<std::unique_ptr<Probe>> DefaultProbes(runtime::Device device,
                                                  TrackingProbe::SessionsFn sessions) {
  std::vector<std::unique_ptr<Probe>> probes;
  probes.push_back(std::make_unique<RuntimeAllocatorProbe>(device));
  probes.push_back(std::make_unique<TrackingProbe>(std::move(sessions)));
  probes.push_back(std::make_unique<HostProcessProbe>());
  return probes;
}

}  // namespace leakbound::harness
