// The observer's CUPTI backend. libcupti is loaded with dlopen, not linked, so that a missing or
// unloadable libcupti is an "unavailable" state rather than a process that fails to start.
// CUPTI's buffer callbacks are process-wide function pointers with no user data, hence the
// globals below; they are guarded by one mutex and only ever point at the one active observer.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "leakbound/cupti/cupti_records.h"
#include "observer_internal.h"

#ifndef LEAKBOUND_CUPTI_LIBRARY_PATH
#define LEAKBOUND_CUPTI_LIBRARY_PATH "libcupti.so"
#endif
#ifndef LEAKBOUND_CUPTI_SONAME
#define LEAKBOUND_CUPTI_SONAME "libcupti.so"
#endif

namespace leakbound::cupti::detail {
namespace {

// The libcupti entry points the observer uses, resolved once per backend.
struct CuptiApi {
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) get_result_string = nullptr;
  decltype(&cuptiGetErrorMessage) get_error_message = nullptr;  // optional
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;  // optional: names the other subscriber
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) num_dropped = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;  // optional: device call sites
};

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

template <typename Function>
bool Resolve(void* handle, const char* name, Function& out) {
  out = reinterpret_cast<Function>(dlsym(handle, name));
  return out != nullptr;
}

std::optional<std::string> LoadCupti(CuptiApi& api) {
  void* handle = nullptr;
  std::string where;
  if (const char* path = std::getenv("LEAKBOUND_CUPTI_LIBRARY"); path != nullptr && *path) {
    where = path;
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      return "could not load libcupti from LEAKBOUND_CUPTI_LIBRARY=" + where + " (" + DlError() +
             "); point it at the toolkit's libcupti.so or unset it";
    }
  } else {
    // Reuse a libcupti the process already has (a second copy would be a second CUPTI), else the
    // build's own, else whatever the loader finds by soname.
    where = LEAKBOUND_CUPTI_SONAME;
    handle = dlopen(LEAKBOUND_CUPTI_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) {
      where = LEAKBOUND_CUPTI_LIBRARY_PATH;
      handle = dlopen(LEAKBOUND_CUPTI_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    }
    if (handle == nullptr) {
      const std::string build_error = DlError();
      where = LEAKBOUND_CUPTI_SONAME;
      handle = dlopen(LEAKBOUND_CUPTI_SONAME, RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        return "could not load libcupti (" + build_error + "; " + DlError() +
               "); install the CUDA toolkit's CUPTI or set LEAKBOUND_CUPTI_LIBRARY";
      }
    }
  }
  // The handle is never closed: CUPTI keeps threads and our callbacks for the process lifetime.
  const char* missing = nullptr;
  if (!Resolve(handle, "cuptiGetVersion", api.get_version)) missing = "cuptiGetVersion";
  if (!Resolve(handle, "cuptiGetResultString", api.get_result_string)) {
    missing = "cuptiGetResultString";
  }
  if (!Resolve(handle, "cuptiSubscribe", api.subscribe)) missing = "cuptiSubscribe";
  if (!Resolve(handle, "cuptiUnsubscribe", api.unsubscribe)) missing = "cuptiUnsubscribe";
  if (!Resolve(handle, "cuptiActivityRegisterCallbacks", api.register_callbacks)) {
    missing = "cuptiActivityRegisterCallbacks";
  }
  if (!Resolve(handle, "cuptiActivityEnable", api.enable)) missing = "cuptiActivityEnable";
  if (!Resolve(handle, "cuptiActivityDisable", api.disable)) missing = "cuptiActivityDisable";
  if (!Resolve(handle, "cuptiActivityFlushAll", api.flush_all)) missing = "cuptiActivityFlushAll";
  if (!Resolve(handle, "cuptiActivityGetNextRecord", api.next_record)) {
    missing = "cuptiActivityGetNextRecord";
  }
  if (!Resolve(handle, "cuptiActivityGetNumDroppedRecords", api.num_dropped)) {
    missing = "cuptiActivityGetNumDroppedRecords";
  }
  if (missing != nullptr) {
    return "libcupti at " + where + " has no " + missing +
           "; it is older than the CUPTI leakbound was built with, use that toolkit's libcupti";
  }
  Resolve(handle, "cuptiGetErrorMessage", api.get_error_message);
  Resolve(handle, "cuptiSubscribe_v2", api.subscribe_v2);
  Resolve(handle, "cuptiEnableCallback", api.enable_callback);
  return std::nullopt;
}

// The process's libcupti entry points, resolved at the first successful load and kept: the
// library is never unloaded, so there is no reason to dlopen it again (the override variable is
// read until a load succeeds). Returns nullptr, and why in `failure`, while loading fails.
const CuptiApi* LoadedCupti(std::string& failure) {
  static std::mutex mutex;
  static std::optional<CuptiApi> loaded;
  std::lock_guard lock(mutex);
  if (!loaded) {
    CuptiApi api;
    if (std::optional<std::string> error = LoadCupti(api)) {
      failure = std::move(*error);
      return nullptr;
    }
    loaded = api;
  }
  return &*loaded;
}

// A fixed set of 8-byte aligned activity buffers, recycled between CUPTI and the observer.
class BufferPool {
 public:
  BufferPool(std::size_t count, std::size_t bytes) : bytes_((bytes + 7) / 8 * 8) {
    for (std::size_t i = 0; i < count; ++i) {
      auto* buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, bytes_));
      if (buffer == nullptr) break;
      all_.push_back(buffer);
      free_.push_back(buffer);
    }
  }
  ~BufferPool() {
    for (std::uint8_t* buffer : all_) std::free(buffer);
  }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  std::uint8_t* Acquire() {
    if (free_.empty()) return nullptr;
    std::uint8_t* buffer = free_.back();
    free_.pop_back();
    return buffer;
  }
  bool Owns(const std::uint8_t* buffer) const {
    for (const std::uint8_t* own : all_) {
      if (own == buffer) return true;
    }
    return false;
  }
  void Release(std::uint8_t* buffer) { free_.push_back(buffer); }
  std::size_t outstanding() const { return all_.size() - free_.size(); }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_;
  std::vector<std::uint8_t*> all_;
  std::vector<std::uint8_t*> free_;
};

// Process-wide state for the callbacks; never destroyed, so a callback CUPTI issues during
// process exit still finds a valid mutex.
struct Delivery {
  std::mutex mutex;
  bool claimed = false;          // an observer owns (or is starting) the CUPTI session
  ObserverCore* core = nullptr;  // set while active
  BufferPool* pool = nullptr;
  const CuptiApi* api = nullptr;
  // Pools CUPTI still held buffers of when their observer stopped: kept (reachable) for good.
  std::vector<std::unique_ptr<BufferPool>> abandoned;
};

Delivery& GlobalDelivery() {
  static auto* delivery = new Delivery;
  return *delivery;
}

void CUPTIAPI OnBufferRequested(std::uint8_t** buffer, std::size_t* size,
                                std::size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  Delivery& delivery = GlobalDelivery();
  std::lock_guard lock(delivery.mutex);
  if (delivery.pool == nullptr) return;  // stopped: CUPTI drops the records
  std::uint8_t* granted = delivery.pool->Acquire();
  {
    std::lock_guard core_lock(delivery.core->mutex);
    ++delivery.core->stats.buffers_requested;
    if (granted == nullptr) ++delivery.core->stats.buffers_refused;
  }
  if (granted != nullptr) {
    *buffer = granted;
    *size = delivery.pool->bytes();
  }
}

void CUPTIAPI OnBufferCompleted(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                                std::size_t valid_size) {
  Delivery& delivery = GlobalDelivery();
  std::lock_guard lock(delivery.mutex);
  // A buffer from a stopped session belongs to an abandoned pool: its records are not ours.
  if (delivery.pool == nullptr || buffer == nullptr || !delivery.pool->Owns(buffer)) return;
  {
    ObserverCore& core = *delivery.core;
    std::lock_guard core_lock(core.mutex);
    CUpti_Activity* record = nullptr;
    while (delivery.api->next_record(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      if (ApplyActivity(record, core.ledger) == ActivityOutcome::kApplied) {
        ++core.stats.records_applied;
      } else {
        ++core.stats.records_ignored;
      }
    }
    // Dropped records are counted by Flush() and Stop(), from the caller's thread: calling back
    // into CUPTI here, under our lock, could invert lock order with CUPTI's own.
    ++core.stats.buffers_completed;
  }
  delivery.pool->Release(buffer);
}

// The subscriber's callback: the runtime API's cudaMalloc (after it, when it succeeded) and
// cudaFree (before it), handed to the options' hooks (userdata: the options). Nothing else is
// enabled.
void CUPTIAPI ApiCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  const auto* options = static_cast<const ObserverOptions*>(userdata);
  if (options == nullptr || domain != CUPTI_CB_DOMAIN_RUNTIME_API || data == nullptr) return;
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call->functionParams == nullptr) return;
  if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 && call->callbackSite == CUPTI_API_EXIT &&
      options->on_device_alloc != nullptr) {
    const auto* params = static_cast<const cudaMalloc_v3020_params*>(call->functionParams);
    const auto* result = static_cast<const cudaError_t*>(call->functionReturnValue);
    if ((result == nullptr || *result == cudaSuccess) && params->devPtr != nullptr &&
        *params->devPtr != nullptr) {
      options->on_device_alloc(reinterpret_cast<std::uintptr_t>(*params->devPtr), params->size);
    }
  } else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020 &&
             call->callbackSite == CUPTI_API_ENTER && options->on_device_free != nullptr) {
    const auto* params = static_cast<const cudaFree_v3020_params*>(call->functionParams);
    if (params->devPtr != nullptr) {
      options->on_device_free(reinterpret_cast<std::uintptr_t>(params->devPtr));
    }
  }
}

// Why CUPTI failed, in its words, plus the likeliest cause when the driver is missing (CUPTI
// itself says only CUPTI_ERROR_UNKNOWN then).
// A driver found here stays loaded: unloading libcuda under a CUDA runtime is not worth the risk.
std::string DriverHint() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr) driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return "; no CUDA driver (" + DlError() + ")";
  return "";
}

class CuptiBackend final : public ObserverBackend {
 public:
  CuptiBackend(const ObserverOptions& options, ObserverCore& core)
      : options_(options), core_(core) {}

  std::optional<std::string> Start() override {
    Delivery& delivery = GlobalDelivery();
    {
      std::lock_guard lock(delivery.mutex);
      if (delivery.claimed) {
        return std::string(
            "another CuptiObserver is already active in this process; stop it first (CUPTI "
            "delivers activity to one client per process)");
      }
      delivery.claimed = true;
    }
    if (std::optional<std::string> failure = Begin()) {
      std::lock_guard lock(delivery.mutex);
      delivery.claimed = false;
      return failure;
    }
    return std::nullopt;
  }

  void Stop() override {
    api_.disable(CUPTI_ACTIVITY_KIND_MEMORY2);
    api_.disable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    NoteDropped();
    Detach();
    api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
  }

  std::optional<std::string> Flush() override {
    const CUptiResult result = api_.flush_all(0);
    NoteDropped();
    if (result == CUPTI_SUCCESS) return std::nullopt;
    {
      std::lock_guard lock(core_.mutex);
      ++core_.stats.flush_errors;
    }
    return Describe("cuptiActivityFlushAll", result);
  }

 private:
  std::optional<std::string> Begin() {
    std::string failure;
    const CuptiApi* api = LoadedCupti(failure);
    if (api == nullptr) return failure;
    api_ = *api;
    std::uint32_t version = 0;
    if (CUptiResult result = api_.get_version(&version); result != CUPTI_SUCCESS) {
      return Describe("cuptiGetVersion", result);
    }
    if (version < CUPTI_API_VERSION) {
      return "libcupti reports API version " + std::to_string(version) +
             " but leakbound was built against " + std::to_string(CUPTI_API_VERSION) +
             "; run with the libcupti of the toolkit it was built with";
    }

    // Claim CUPTI first, as its documentation asks of every client: if someone else holds it,
    // touch nothing (registering callbacks would steal their buffers).
    char holder[2 * CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
    CUptiResult result;
    const char* subscribe_call = "cuptiSubscribe_v2";
    if (api_.subscribe_v2 != nullptr) {
      CUpti_SubscriberParams params{};
      params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
      params.subscriberName = "leakbound";
      params.oldSubscriberName = holder;
      params.oldSubscriberSize = sizeof(holder);
      result = api_.subscribe_v2(&subscriber_, &ApiCallback, &options_, &params);
    } else {
      subscribe_call = "cuptiSubscribe";
      result = api_.subscribe(&subscriber_, &ApiCallback, &options_);
    }
    if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      subscriber_ = nullptr;
      return "another CUPTI client already holds this process (" +
             std::string(holder[0] != '\0' ? holder
                                           : "Nsight Systems/Compute, cuda-gdb, "
                                             "compute-sanitizer or a framework profiler") +
             "); leakbound leaves it alone, run without it to use the CUPTI ledger";
    }
    if (result != CUPTI_SUCCESS) {
      subscriber_ = nullptr;
      return Describe(subscribe_call, result);
    }

    pool_ = std::make_unique<BufferPool>(options_.buffer_count, options_.buffer_bytes);
    {
      Delivery& delivery = GlobalDelivery();
      std::lock_guard lock(delivery.mutex);
      delivery.core = &core_;
      delivery.pool = pool_.get();
      delivery.api = &api_;
    }
    result = api_.register_callbacks(&OnBufferRequested, &OnBufferCompleted);
    if (result != CUPTI_SUCCESS) return Abort(Describe("cuptiActivityRegisterCallbacks", result));
    result = api_.enable(CUPTI_ACTIVITY_KIND_MEMORY2);
    if (result != CUPTI_SUCCESS) {
      return Abort(Describe("cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2)", result));
    }
    result = api_.enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    if (result != CUPTI_SUCCESS) {
      api_.disable(CUPTI_ACTIVITY_KIND_MEMORY2);
      return Abort(Describe("cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL)", result));
    }
    // Device call sites (optional): a libcupti without callbacks, or one that refuses them,
    // leaves the ledger as it is, with no call sites.
    // Both or neither: allocations seen without their frees would only ever grow.
    if (api_.enable_callback != nullptr && options_.on_device_alloc != nullptr &&
        options_.on_device_free != nullptr) {
      const bool both = api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API,
                                             CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) ==
                            CUPTI_SUCCESS &&
                        api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API,
                                             CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020) ==
                            CUPTI_SUCCESS;
      if (!both) {
        api_.enable_callback(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API,
                             CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020);
        api_.enable_callback(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API,
                             CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020);
      }
    }
    return std::nullopt;
  }

  std::string Abort(std::string reason) {
    Detach();
    api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
    return reason;
  }

  // Unhooks the callbacks from this observer. CUPTI keeps calling them (callbacks cannot be
  // unregistered); with no pool they hand out no buffer and ignore what comes back.
  void Detach() {
    Delivery& delivery = GlobalDelivery();
    std::lock_guard lock(delivery.mutex);
    delivery.core = nullptr;
    delivery.pool = nullptr;
    delivery.api = nullptr;
    delivery.claimed = false;
    if (pool_ && pool_->outstanding() > 0) delivery.abandoned.push_back(std::move(pool_));
    pool_.reset();
  }

  void NoteDropped() {
    std::size_t dropped = 0;
    if (api_.num_dropped(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
      std::lock_guard lock(core_.mutex);
      core_.ledger.NoteDropped(dropped);
    }
  }

  std::string Describe(const char* call, CUptiResult result) const {
    const char* name = nullptr;
    if (api_.get_result_string == nullptr ||
        api_.get_result_string(result, &name) != CUPTI_SUCCESS || name == nullptr) {
      name = "unknown CUPTI result";
    }
    std::string text = std::string(call) + " failed: " + name + " (" +
                       std::to_string(static_cast<int>(result)) + ")";
    const char* message = nullptr;
    if (api_.get_error_message != nullptr &&
        api_.get_error_message(result, &message) == CUPTI_SUCCESS && message != nullptr &&
        *message != '\0' && std::strcmp(message, name) != 0) {
      text.append(" ").append(message);
    }
    return text + DriverHint();
  }

  ObserverOptions options_;
  ObserverCore& core_;
  CuptiApi api_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::unique_ptr<BufferPool> pool_;
};

}  // namespace

std::unique_ptr<ObserverBackend> MakeObserverBackend(const ObserverOptions& options,
                                                     ObserverCore& core) {
  return std::make_unique<CuptiBackend>(options, core);
}

}  // namespace leakbound::cupti::detail
