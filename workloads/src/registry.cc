// The registry: every workload, clean first, then traps, then the zoo, built once on first use.
#include <set>
#include <stdexcept>

#include "common.h"

namespace leakbound::workloads {

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kClean:
      return "clean";
    case Kind::kZoo:
      return "zoo";
    case Kind::kTrap:
      return "trap";
  }
  return "unknown";
}

const std::vector<Registration>& AllWorkloads() {
  static const std::vector<Registration> all = [] {
    std::vector<Registration> out;
    internal::AddCleanWorkloads(out);
    internal::AddTrapWorkloads(out);
    internal::AddZooWorkloads(out);
    internal::AddGpuZooWorkloads(out);
    std::set<std::string> names;
    for (const Registration& registration : out) {
      if (!names.insert(registration.info.name).second) {
        throw std::logic_error("workload name registered twice: " + registration.info.name);
      }
    }
    return out;
  }();
  return all;
}

const Registration* FindWorkload(const std::string& name) {
  for (const Registration& registration : AllWorkloads()) {
    if (registration.info.name == name) return &registration;
  }
  return nullptr;
}

}  // namespace leakbound::workloads
