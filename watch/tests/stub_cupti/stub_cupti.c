/* A stand-in libcupti for testing `leakbound watch`'s CUDA injection without a
 * GPU (loaded by the observer through LEAKBOUND_CUPTI_LIBRARY). It implements
 * the CUPTI calls CuptiObserver makes, and a fake program's "allocations"
 * (stub_cupti_* below) become synthetic CUpti_ActivityMemory4 /
 * CUpti_ActivityMemoryPool3 records delivered at cuptiActivityFlushAll, through
 * the buffers the observer hands out, as CUPTI would. stub_cupti_malloc and
 * stub_cupti_free are the program's cudaMalloc / cudaFree: with the runtime
 * API's callbacks for them enabled (cuptiEnableCallback), the subscriber's
 * callback runs on the caller's thread, after the malloc and before the free,
 * with their parameters, as CUPTI's callback API does.
 * LEAKBOUND_STUB_CUPTI_HELD=NAME makes CUPTI look already held by the client
 * NAME. */
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define STUB_EXPORT __attribute__((visibility("default")))

typedef union StubRecord {
  CUpti_Activity header;
  CUpti_ActivityMemory4 memory;
  CUpti_ActivityMemoryPool3 pool;
} StubRecord;

enum { kQueueCapacity = 4096, kSlot = (sizeof(StubRecord) + 7) / 8 * 8 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static StubRecord g_queue[kQueueCapacity];
static size_t g_queued;
static size_t g_dropped;
static uint64_t g_clock = 1000;
static int g_subscribed;
static int g_memory_enabled, g_pool_enabled;
static CUpti_BuffersCallbackRequestFunc g_request;
static CUpti_BuffersCallbackCompleteFunc g_complete;
static CUpti_CallbackFunc g_callback; /* the subscriber's */
static void *g_callback_data;
static int g_malloc_callback, g_free_callback; /* enabled runtime-API callbacks */
static uint32_t g_correlation;

/* ---- the fake program's side
 * ---------------------------------------------------------------- */

static void Queue(const StubRecord *record) {
  pthread_mutex_lock(&g_lock);
  if (g_queued < kQueueCapacity) {
    g_queue[g_queued++] = *record;
  } else {
    ++g_dropped;
  }
  pthread_mutex_unlock(&g_lock);
}

static void Memory(CUpti_ActivityMemoryOperationType operation, uint64_t address, uint64_t bytes,
                   uint64_t pool_address, uint64_t pool_size, uint64_t pool_utilized) {
  pthread_mutex_lock(&g_lock);
  const int enabled = g_memory_enabled;
  const uint64_t now = g_clock++;
  pthread_mutex_unlock(&g_lock);
  if (!enabled) return; /* CUPTI records nothing while the kind is disabled */
  StubRecord record;
  memset(&record, 0, sizeof record);
  record.memory.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  record.memory.memoryOperationType = operation;
  record.memory.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  record.memory.address = address;
  record.memory.bytes = bytes;
  record.memory.timestamp = now;
  record.memory.contextId = 1;
  record.memory.streamId = CUPTI_INVALID_STREAM_ID;
  if (pool_address != 0) {
    record.memory.isAsync = 1;
    record.memory.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    record.memory.memoryPoolConfig.address = pool_address;
    record.memory.memoryPoolConfig.pool.size = pool_size;
    record.memory.memoryPoolConfig.utilizedSize = pool_utilized;
  }
  Queue(&record);
}

/* cudaMalloc / cudaFree of `bytes` at `address`. */
/* The subscriber's runtime-API callback for cbid at site, with params and result. */
static void RuntimeCallback(CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, const char *name,
                            void *params, cudaError_t *result) {
  pthread_mutex_lock(&g_lock);
  CUpti_CallbackFunc callback = g_callback;
  void *data = g_callback_data;
  const int enabled = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 ? g_malloc_callback
                                                                         : g_free_callback;
  const uint32_t correlation = ++g_correlation;
  pthread_mutex_unlock(&g_lock);
  if (callback == NULL || !enabled) return;
  CUpti_CallbackData call;
  memset(&call, 0, sizeof call);
  call.callbackSite = site;
  call.functionName = name;
  call.functionParams = params;
  call.functionReturnValue = result;
  call.correlationId = correlation;
  callback(data, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &call);
}

STUB_EXPORT void stub_cupti_malloc(uint64_t address, uint64_t bytes) {
  Memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, address, bytes, 0, 0, 0);
  void *pointer = (void *)(uintptr_t)address;
  cudaMalloc_v3020_params params = {&pointer, (size_t)bytes};
  cudaError_t result = cudaSuccess;
  RuntimeCallback(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, "cudaMalloc", &params,
                  &result);
}
STUB_EXPORT void stub_cupti_free(uint64_t address, uint64_t bytes) {
  cudaFree_v3020_params params = {(void *)(uintptr_t)address};
  RuntimeCallback(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, CUPTI_API_ENTER, "cudaFree", &params,
                  NULL);
  Memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, address, bytes, 0, 0, 0);
}
/* cudaMallocAsync / cudaFreeAsync from the pool at pool_address, which then
 * reserves pool_size bytes of which pool_utilized are handed out. */
STUB_EXPORT void stub_cupti_malloc_async(uint64_t address, uint64_t bytes, uint64_t pool_address,
                                         uint64_t pool_size, uint64_t pool_utilized) {
  Memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, address, bytes, pool_address, pool_size,
         pool_utilized);
}
STUB_EXPORT void stub_cupti_free_async(uint64_t address, uint64_t bytes, uint64_t pool_address,
                                       uint64_t pool_size, uint64_t pool_utilized) {
  Memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, address, bytes, pool_address, pool_size,
         pool_utilized);
}
/* cudaMemPoolCreate: a MEMORY_POOL record. */
STUB_EXPORT void stub_cupti_pool_created(uint64_t pool_address, uint64_t size) {
  pthread_mutex_lock(&g_lock);
  const int enabled = g_pool_enabled;
  const uint64_t now = g_clock++;
  pthread_mutex_unlock(&g_lock);
  if (!enabled) return;
  StubRecord record;
  memset(&record, 0, sizeof record);
  record.pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  record.pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
  record.pool.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  record.pool.address = pool_address;
  record.pool.size = size;
  record.pool.timestamp = now;
  Queue(&record);
}
/* 1 while an observer holds the stub (subscribed, MEMORY2 enabled). */
STUB_EXPORT int stub_cupti_collecting(void) {
  pthread_mutex_lock(&g_lock);
  const int collecting = g_subscribed && g_memory_enabled;
  pthread_mutex_unlock(&g_lock);
  return collecting;
}

/* ---- the CUPTI calls CuptiObserver makes
 * ------------------------------------------------- */

STUB_EXPORT CUptiResult cuptiGetVersion(uint32_t *version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **text) {
  switch (result) {
    case CUPTI_SUCCESS:
      *text = "CUPTI_SUCCESS";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *text = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
      *text = "CUPTI_ERROR_MAX_LIMIT_REACHED";
      break;
    default:
      *text = "CUPTI_ERROR_UNKNOWN";
  }
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber,
                                          CUpti_CallbackFunc callback, void *userdata,
                                          CUpti_SubscriberParams *params) {
  const char *held = getenv("LEAKBOUND_STUB_CUPTI_HELD");
  pthread_mutex_lock(&g_lock);
  const char *holder = (held && *held) ? held : g_subscribed ? "leakbound" : NULL;
  if (holder == NULL) {
    g_subscribed = 1;
    g_callback = callback;
    g_callback_data = userdata;
  }
  pthread_mutex_unlock(&g_lock);
  if (holder != NULL) {
    if (params && params->oldSubscriberName && params->oldSubscriberSize > 0) {
      strncpy(params->oldSubscriberName, holder, params->oldSubscriberSize - 1);
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  *subscriber = (CUpti_SubscriberHandle)&g_subscribed;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber,
                                       CUpti_CallbackFunc callback, void *userdata) {
  return cuptiSubscribe_v2(subscriber, callback, userdata, NULL);
}

STUB_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  (void)subscriber;
  pthread_mutex_lock(&g_lock);
  g_subscribed = 0;
  g_callback = NULL;
  g_malloc_callback = g_free_callback = 0;
  pthread_mutex_unlock(&g_lock);
  return CUPTI_SUCCESS;
}

/* The runtime API's cudaMalloc and cudaFree callbacks; any other is accepted and never runs. */
STUB_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (subscriber != (CUpti_SubscriberHandle)&g_subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&g_lock);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) {
    g_malloc_callback = enable != 0;
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020) {
    g_free_callback = enable != 0;
  }
  pthread_mutex_unlock(&g_lock);
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc done) {
  g_request = request;
  g_complete = done;
  return CUPTI_SUCCESS;
}

static CUptiResult SetKind(CUpti_ActivityKind kind, int on) {
  pthread_mutex_lock(&g_lock);
  if (kind == CUPTI_ACTIVITY_KIND_MEMORY2) g_memory_enabled = on;
  if (kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL) g_pool_enabled = on;
  pthread_mutex_unlock(&g_lock);
  return CUPTI_SUCCESS;
}
STUB_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) { return SetKind(kind, 1); }
STUB_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) { return SetKind(kind, 0); }

/* Hands the queued records to the observer, a buffer at a time, on the caller's
 * thread. */
STUB_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  for (;;) {
    pthread_mutex_lock(&g_lock);
    const size_t queued = g_queued;
    pthread_mutex_unlock(&g_lock);
    if (queued == 0 || g_request == NULL || g_complete == NULL) return CUPTI_SUCCESS;
    uint8_t *buffer = NULL;
    size_t size = 0, max_records = 0;
    g_request(&buffer, &size, &max_records);
    if (buffer == NULL || size < kSlot) {
      pthread_mutex_lock(&g_lock);
      g_dropped += g_queued;
      g_queued = 0;
      pthread_mutex_unlock(&g_lock);
      return CUPTI_SUCCESS;
    }
    pthread_mutex_lock(&g_lock);
    size_t n = size / kSlot;
    if (n > g_queued) n = g_queued;
    for (size_t i = 0; i < n; ++i) memcpy(buffer + i * kSlot, &g_queue[i], sizeof(StubRecord));
    memmove(g_queue, g_queue + n, (g_queued - n) * sizeof(StubRecord));
    g_queued -= n;
    pthread_mutex_unlock(&g_lock);
    g_complete(NULL, 0, buffer, size, n * kSlot);
  }
}

STUB_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                   CUpti_Activity **record) {
  uint8_t *next = *record == NULL ? buffer : (uint8_t *)*record + kSlot;
  if (next + kSlot > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity *)next;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t stream,
                                                          size_t *dropped) {
  (void)context;
  (void)stream;
  pthread_mutex_lock(&g_lock);
  *dropped = g_dropped;
  g_dropped = 0;
  pthread_mutex_unlock(&g_lock);
  return CUPTI_SUCCESS;
}
