/* libleakbound_nvtx_inject.so: the NVTX injection behind `leakbound watch
 * --step-range NAME`. NVTX (header-only nvtx3, no GPU needed) loads the library
 * named by NVTX_INJECTION64_PATH and calls InitializeInjectionNvtx2, which
 * swaps in our range push/pop and start/end; each end of a range named
 * LEAKBOUND_STEP_RANGE calls the preload's leakbound_step (resolved with dlsym,
 * so without the preload the ranges are simply ignored). The hooks never
 * allocate or lock. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "leakbound/watch/channel.h"

#define LB_EXPORT __attribute__((visibility("default")))

enum { kNameMax = 256, kMaxDepth = 64 };

static char g_name[kNameMax];
static wchar_t g_wide_name[kNameMax];
static void (*g_step)(void);
static void (*g_note)(const char *);
static _Atomic uint64_t g_next_range_id = 1;
static _Atomic int g_initialized;

/* Per thread: bit d of g_matches says whether the range pushed at depth d is
 * the step range. */
static __thread uint64_t g_matches;
static __thread int g_depth;

/* Registered strings: the handle we hand back is the address of a copy of the
 * text, so a registered message reads like an ASCII one. Copies are made at
 * registration (not in a range hook) and live for the process. */
static const char *TextOf(const nvtxEventAttributes_t *attributes) {
  if (attributes == NULL) return NULL;
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return attributes->message.ascii;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return (const char *)attributes->message.registered;
    default:
      return NULL;
  }
}

static int IsStepA(const char *text) { return text != NULL && strcmp(text, g_name) == 0; }
static int IsStepW(const wchar_t *text) { return text != NULL && wcscmp(text, g_wide_name) == 0; }
static int IsStepEx(const nvtxEventAttributes_t *attributes) {
  if (attributes != NULL && attributes->messageType == NVTX_MESSAGE_TYPE_UNICODE) {
    return IsStepW(attributes->message.unicode);
  }
  return IsStepA(TextOf(attributes));
}

static void Step(void) {
  if (g_step != NULL) g_step();
}

static int Push(int is_step) {
  if (g_depth < kMaxDepth) {
    const uint64_t bit = (uint64_t)1 << g_depth;
    g_matches = is_step ? (g_matches | bit) : (g_matches & ~bit);
  }
  return g_depth++;
}

static int Pop(void) {
  if (g_depth <= 0) return -1;
  const int depth = --g_depth;
  if (depth < kMaxDepth && (g_matches >> depth) & 1u) Step();
  return depth;
}

/* A range id carries its match in the low bit, so End needs no table. */
static nvtxRangeId_t Start(int is_step) {
  return (atomic_fetch_add(&g_next_range_id, 1) << 1) | (uint64_t)(is_step != 0);
}
static void End(nvtxRangeId_t id) {
  if (id & 1u) Step();
}

static int PushA(const char *text) { return Push(IsStepA(text)); }
static int PushW(const wchar_t *text) { return Push(IsStepW(text)); }
static int PushEx(const nvtxEventAttributes_t *attributes) { return Push(IsStepEx(attributes)); }
static nvtxRangeId_t StartA(const char *text) { return Start(IsStepA(text)); }
static nvtxRangeId_t StartW(const wchar_t *text) { return Start(IsStepW(text)); }
static nvtxRangeId_t StartEx(const nvtxEventAttributes_t *attributes) {
  return Start(IsStepEx(attributes));
}
static int DomainPushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attributes) {
  (void)domain;
  return PushEx(attributes);
}
static int DomainPop(nvtxDomainHandle_t domain) {
  (void)domain;
  return Pop();
}
static nvtxRangeId_t DomainStartEx(nvtxDomainHandle_t domain,
                                   const nvtxEventAttributes_t *attributes) {
  (void)domain;
  return StartEx(attributes);
}
static void DomainEnd(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  (void)domain;
  End(id);
}
static nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t domain, const char *text) {
  (void)domain;
  return (nvtxStringHandle_t)(text != NULL ? strdup(text) : NULL);
}
/* Domains are opaque to NVTX's callers; any non-null handle will do. */
static nvtxDomainHandle_t DomainCreateA(const char *name) {
  (void)name;
  return (nvtxDomainHandle_t)&g_name;
}
static nvtxDomainHandle_t DomainCreateW(const wchar_t *name) {
  (void)name;
  return (nvtxDomainHandle_t)&g_name;
}

static void Install(NvtxFunctionTable table, unsigned int size, unsigned int id,
                    NvtxFunctionPointer function) {
  if (table != NULL && id < size && table[id] != NULL) *table[id] = function;
}

static int InstallAll(NvtxGetExportTableFunc_t get_export_table) {
  const NvtxExportTableCallbacks *callbacks =
      (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
  if (callbacks == NULL || callbacks->GetModuleFunctionTable == NULL) return 0;
  NvtxFunctionTable core = NULL, core2 = NULL;
  unsigned int core_size = 0, core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size)) return 0;
  Install(core, core_size, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)PushA);
  Install(core, core_size, NVTX_CBID_CORE_RangePushW, (NvtxFunctionPointer)PushW);
  Install(core, core_size, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)PushEx);
  Install(core, core_size, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)Pop);
  Install(core, core_size, NVTX_CBID_CORE_RangeStartA, (NvtxFunctionPointer)StartA);
  Install(core, core_size, NVTX_CBID_CORE_RangeStartW, (NvtxFunctionPointer)StartW);
  Install(core, core_size, NVTX_CBID_CORE_RangeStartEx, (NvtxFunctionPointer)StartEx);
  Install(core, core_size, NVTX_CBID_CORE_RangeEnd, (NvtxFunctionPointer)End);
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) {
    Install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx,
            (NvtxFunctionPointer)DomainPushEx);
    Install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)DomainPop);
    Install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx,
            (NvtxFunctionPointer)DomainStartEx);
    Install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, (NvtxFunctionPointer)DomainEnd);
    Install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA,
            (NvtxFunctionPointer)DomainRegisterStringA);
    Install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)DomainCreateA);
    Install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, (NvtxFunctionPointer)DomainCreateW);
  }
  return 1;
}

/* Called once by NVTX at the first NVTX call of the process. Returns 1 when the
 * hooks are in; 0 tells NVTX to run with no tool (the program is unaffected
 * either way). */
LB_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (atomic_exchange(&g_initialized, 1)) return 1;
  const char *name = getenv(LEAKBOUND_WATCH_ENV_STEP_RANGE);
  if (name == NULL || *name == '\0' || get_export_table == NULL) return 0;
  strncpy(g_name, name, kNameMax - 1);
  if (mbstowcs(g_wide_name, g_name, kNameMax - 1) == (size_t)-1) g_wide_name[0] = L'\0';
  void *step = dlsym(RTLD_DEFAULT, "leakbound_step");
  void *note = dlsym(RTLD_DEFAULT, "leakbound_note");
  memcpy(&g_step, &step, sizeof step);
  memcpy(&g_note, &note, sizeof note);
  if (!InstallAll(get_export_table)) {
    if (g_note != NULL) g_note("step-range: NVTX offered no callback table; no steps are marked");
    return 0;
  }
  if (g_note != NULL) {
    char text[LEAKBOUND_WATCH_TEXT];
    snprintf(text, sizeof text, "step-range: each end of the NVTX range \"%.120s\" is a step",
             g_name);
    g_note(text);
  }
  return 1;
}
