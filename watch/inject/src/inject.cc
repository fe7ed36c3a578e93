// libleakbound_inject.so: the CUDA injection of `leakbound watch` (named in
// CUDA_INJECTION64_PATH). The CUDA driver calls InitializeInjection at
// initialisation; it starts cupti's CuptiObserver (compiled in) and
// registers a sampler with the preload, which flushes CUPTI and sends the
// ledger's counters at every step marker. docs/cupti.md, "Injection".
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "leakbound/cupti/counters.h"
#include "leakbound/cupti/observer.h"
#include "leakbound/watch/channel.h"

namespace {

namespace cupti = leakbound::cupti;

// Never destroyed: CUPTI may deliver buffers while the process exits.
std::atomic<cupti::CuptiObserver *> g_observer{nullptr};
std::atomic<int> g_initialized{0};
leakbound_watch_probe_state_fn g_probe_state = nullptr;
void (*g_note)(const char *) = nullptr;
std::string *g_sent_state = nullptr;  // the state last reported (guarded by the marker lock)

constexpr const char *kLoadedTwice =
    "cuda-injection: InitializeInjection was called again (the injection "
    "library was loaded "
    "twice); the second call did nothing";

template <typename Function>
Function Lookup(const char *name) {
  void *symbol = dlsym(RTLD_DEFAULT, name);
  Function function = nullptr;
  std::memcpy(&function, &symbol, sizeof function);
  return function;
}

void ReportState(const std::string &state) {
  if (g_probe_state != nullptr) g_probe_state("cupti", state.c_str());
}

// Runs on the marking thread under the preload's marker lock, its allocations
// excluded from the host counters. The program's streams are its own: this
// flush delivers what the driver has recorded, it does not synchronise
// (docs/cupti.md, "What quiesced means").
unsigned SampleDevice(std::uint64_t *values, unsigned capacity) {
  cupti::CuptiObserver *observer = g_observer.load(std::memory_order_acquire);
  if (observer == nullptr || capacity < LEAKBOUND_DEVICE_VALUE_COUNT) return 0;
  observer->Flush();
  if (const std::string state = observer->StateString(); state != *g_sent_state) {
    *g_sent_state = state;  // a failed flush stops collection: say so once
    ReportState(state);
  }
  static std::vector<double> counters;
  counters.clear();
  cupti::AppendLedgerCounters(observer->Snapshot(), counters);
  const unsigned n = counters.size() < LEAKBOUND_DEVICE_VALUE_COUNT
                         ? static_cast<unsigned>(counters.size())
                         : static_cast<unsigned>(LEAKBOUND_DEVICE_VALUE_COUNT);
  for (unsigned i = 0; i < n; ++i) {
    values[i] = counters[i] > 0 ? static_cast<std::uint64_t>(counters[i]) : 0;
  }
  return n;
}

// Why CUPTI must be left alone in this process, or empty.
std::string Refusal() {
  const char *nvtx = std::getenv("NVTX_INJECTION64_PATH");
  if (nvtx != nullptr && std::strstr(nvtx, "libcupti") != nullptr) {
    return std::string("NVTX_INJECTION64_PATH names libcupti (") + nvtx +
           "): a CUPTI-based tool (Nsight Systems, a profiler) is attached to "
           "this process and "
           "CUPTI takes one client; leakbound leaves it alone (run without "
           "that tool to see the "
           "device ledger)";
  }
  return {};
}

void Start() {
  g_probe_state = Lookup<leakbound_watch_probe_state_fn>("leakbound_probe_state");
  g_note = Lookup<void (*)(const char *)>("leakbound_note");
  auto claim = Lookup<leakbound_watch_claim_device_fn>("leakbound_watch_claim_device");
  auto set_sampler =
      Lookup<leakbound_watch_set_device_sampler_fn>("leakbound_watch_set_device_sampler");
  // Not under `leakbound watch` (or not the process it follows): nobody to
  // report to.
  if (claim == nullptr || set_sampler == nullptr) return;
  const int claimed = claim();
  if (claimed == 2) {
    if (g_note != nullptr) g_note(kLoadedTwice);
    return;
  }
  if (claimed != 1) return;
  if (const std::string refusal = Refusal(); !refusal.empty()) {
    ReportState("unavailable: " + refusal);
    return;
  }
  g_sent_state = new std::string;
  // Where device memory is allocated: the preload books each cudaMalloc at the program's call
  // site (and each cudaFree), on the allocating thread; without those exports, no call sites.
  cupti::ObserverOptions options;
  options.on_device_alloc =
      Lookup<leakbound_watch_device_alloc_fn>("leakbound_watch_device_alloc");
  options.on_device_free = Lookup<leakbound_watch_device_free_fn>("leakbound_watch_device_free");
  if (options.on_device_alloc == nullptr || options.on_device_free == nullptr) {
    options.on_device_alloc = nullptr;
    options.on_device_free = nullptr;
  }
  auto *observer = new cupti::CuptiObserver(options);
  observer->Start();
  *g_sent_state = observer->StateString();
  ReportState(*g_sent_state);
  if (observer->state() != cupti::ObserverState::kActive) return;
  g_observer.store(observer, std::memory_order_release);
  set_sampler(&SampleDevice);
}

}  // namespace

// The CUDA driver's entry point (CUDA_INJECTION64_PATH), called once per
// process at CUDA initialisation. Tiny and never fatal: any failure becomes a
// probe state in the report, and the program runs on unobserved. Returns 1 (the
// driver ignores the library on 0).
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (g_initialized.exchange(1) != 0) {
    if (g_note == nullptr) g_note = Lookup<void (*)(const char *)>("leakbound_note");
    if (g_note != nullptr) g_note(kLoadedTwice);
    return 1;
  }
  try {
    Start();
  } catch (...) {  // an allocation failure must not take the program down
  }
  return 1;
}
