// The observer's backend in a build without CUPTI: Start() always reports why it cannot run.
#include "observer_internal.h"

namespace leakbound::cupti::detail {
namespace {

class UnavailableBackend final : public ObserverBackend {
 public:
  std::optional<std::string> Start() override {
    return "built without CUPTI (configure with the CUDA toolkit installed and "
           "LEAKBOUND_CUDA=AUTO or ON)";
  }
  void Stop() override {}
  std::optional<std::string> Flush() override { return std::nullopt; }
};

}  // namespace

std::unique_ptr<ObserverBackend> MakeObserverBackend(const ObserverOptions&, ObserverCore&) {
  return std::make_unique<UnavailableBackend>();
}

}  // namespace leakbound::cupti::detail
