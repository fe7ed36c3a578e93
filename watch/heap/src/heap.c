/* Placeholder: reports the heap as unavailable until the interposer lands. */
#include "leakbound/watch/heap.h"
#include <string.h>
int leakbound_heap_active(void) { return 0; }
const char* leakbound_heap_state(void) { return "unavailable: interposer not built"; }
void leakbound_heap_read(leakbound_heap_stats* out) { memset(out, 0, sizeof *out); }
void leakbound_heap_reset_peak(void) {}
void leakbound_heap_exclude_begin(void) {}
void leakbound_heap_exclude_end(void) {}
