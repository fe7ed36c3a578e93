// Device probes for CUDA sessions: the driver's view (cudaMemGetInfo: noisy), the runtime's
// stream-ordered pool (reserved/used, exact), CUDA graph memory (exact) and the CUPTI ledger of
// every device allocation in the process, including those that bypass the runtime (exact).
// In a build without CUDA these are empty and the observer says why.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "leakbound/harness/probe.h"
#include "leakbound/runtime/device.h"

namespace leakbound::harness {

// Starts the process-wide CUPTI observer for a CUDA device. Must run before the process's first
// CUDA call (the CLI does it first thing); a no-op on the CPU stub. Never throws: an
// unavailable observer reports why in DeviceObserverState().
void StartDeviceObservers(const runtime::Device& device);
// "not used (cpu)", "active", or "unavailable: <reason>".
std::string DeviceObserverState();

// Probes for the device (empty on the CPU stub). They synchronise the device before sampling.
std::vector<std::unique_ptr<Probe>> DeviceProbes(const runtime::Device& device);

}  // namespace leakbound::harness
