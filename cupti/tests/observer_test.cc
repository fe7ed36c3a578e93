// CuptiObserver on a machine without a usable CUPTI session (no driver here, or a build without
// CUPTI): Start() must report "unavailable: <reason>", never crash, and leave everything usable.
#include "leakbound/cupti/observer.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace leakbound::cupti {
namespace {

// Whether the NVIDIA driver library can be loaded; `why` gets the loader's reason if not.
bool DriverLoadable(std::string& why) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    const char* error = dlerror();
    why = error != nullptr ? error : "libcuda.so.1 not loadable";
    return false;
  }
  return true;  // left loaded, as the observer leaves it
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

TEST(CuptiObserver, BeforeStart_IsDisabledWithAnEmptyLedger) {
  CuptiObserver observer;
  EXPECT_EQ(observer.state(), ObserverState::kDisabled);
  EXPECT_EQ(observer.StateString(), "disabled");
  observer.Flush();  // no-op
  observer.Stop();   // no-op
  EXPECT_EQ(observer.Snapshot(), LedgerSnapshot{});
}

TEST(CuptiObserver, Start_WithoutDriver_ReportsUnavailableWithReason) {
  CuptiObserver observer;
  const ObserverState state = observer.Start();
  std::cout << "CuptiObserver::Start() -> " << observer.StateString() << "\n";
#if LEAKBOUND_HAVE_CUPTI
  std::string why;
  if (DriverLoadable(why)) {
    GTEST_SKIP() << "a CUDA driver is installed, so this test of the no-driver path does not "
                    "apply (Start() said: "
                 << observer.StateString() << ")";
  }
  EXPECT_EQ(state, ObserverState::kUnavailable);
  EXPECT_TRUE(StartsWith(observer.StateString(), "unavailable: ")) << observer.StateString();
  EXPECT_NE(observer.unavailable_reason().find("CUPTI_ERROR_"), std::string::npos)
      << observer.unavailable_reason();
  EXPECT_NE(observer.unavailable_reason().find("no CUDA driver (" + why + ")"), std::string::npos)
      << observer.unavailable_reason();
#else
  EXPECT_EQ(state, ObserverState::kUnavailable);
  EXPECT_TRUE(StartsWith(observer.StateString(), "unavailable: built without CUPTI"));
  EXPECT_EQ(observer.StateString(),
            "unavailable: built without CUPTI (configure with the CUDA toolkit installed and "
            "LEAKBOUND_CUDA=AUTO or ON)");
#endif
  // Everything stays safe in that state, and trying again gives the same answer.
  observer.Flush();
  observer.Stop();
  EXPECT_EQ(observer.state(), ObserverState::kUnavailable);
  const std::string first_reason = observer.unavailable_reason();
  EXPECT_EQ(observer.Start(), ObserverState::kUnavailable);
  EXPECT_EQ(observer.unavailable_reason(), first_reason);
  EXPECT_EQ(observer.Snapshot(), LedgerSnapshot{});
  const ObserverStats stats = observer.stats();
  EXPECT_EQ(stats.buffers_requested, 0u);
  EXPECT_EQ(stats.records_applied, 0u);
}

TEST(CuptiObserver, FailedStart_ReleasesTheProcessWideClaim) {
  std::string why;
  if (DriverLoadable(why)) GTEST_SKIP() << "a CUDA driver is installed: Start() may succeed";
  CuptiObserver first;
  first.Start();
  CuptiObserver second;
  second.Start();
  EXPECT_EQ(second.state(), ObserverState::kUnavailable);
  EXPECT_EQ(second.unavailable_reason(), first.unavailable_reason());
  EXPECT_EQ(second.unavailable_reason().find("already active"), std::string::npos);
}

#if LEAKBOUND_HAVE_CUPTI
TEST(CuptiObserver, Start_WithUnloadableLibcupti_ReportsUnavailable) {
  struct EnvironmentGuard {
    EnvironmentGuard() { setenv("LEAKBOUND_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1); }
    ~EnvironmentGuard() { unsetenv("LEAKBOUND_CUPTI_LIBRARY"); }
  } guard;
  CuptiObserver observer;
  EXPECT_EQ(observer.Start(), ObserverState::kUnavailable);
  EXPECT_TRUE(StartsWith(observer.StateString(),
                         "unavailable: could not load libcupti from "
                         "LEAKBOUND_CUPTI_LIBRARY=/nonexistent/libcupti.so.13 ("))
      << observer.StateString();
  EXPECT_NE(observer.unavailable_reason().find("point it at the toolkit's libcupti.so or unset it"),
            std::string::npos);
}
#endif

}  // namespace
}  // namespace leakbound::cupti
