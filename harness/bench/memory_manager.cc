// StatisticsMemoryManager: one statistics counter scope per memory pass.
#include "memory_manager.h"

#include <atomic>

namespace leakbound::bench {
namespace {
// The manager whose window is open (benchmarks run on the main thread, one at a time).
std::atomic<StatisticsMemoryManager*> open_manager{nullptr};
}  // namespace

void StatisticsMemoryManager::Start() {
  stats_.PushScope();
  open_ = true;
  open_manager.store(this);
}

void StatisticsMemoryManager::RestartWindow() {
  if (!open_) return;
  stats_.PopScope();
  stats_.PushScope();
}

void StatisticsMemoryManager::CloseWindow() {
  if (!open_) return;
  closed_ = stats_.PopScope();
  open_ = false;
}

void StatisticsMemoryManager::Stop(Result& result) {
  open_manager.store(nullptr);
  const runtime::MemoryStats delta = open_ ? stats_.PopScope() : closed_;
  open_ = false;
  result.num_allocs = delta.allocation_count;
  result.max_bytes_used = delta.peak_bytes;
  result.total_allocated_bytes = delta.total_bytes_allocated;
  result.net_heap_growth = delta.live_bytes;
}

MemoryPassWindow::MemoryPassWindow() {
  if (StatisticsMemoryManager* manager = open_manager.load()) manager->RestartWindow();
}

MemoryPassWindow::~MemoryPassWindow() {
  if (StatisticsMemoryManager* manager = open_manager.load()) manager->CloseWindow();
}

}  // namespace leakbound::bench
