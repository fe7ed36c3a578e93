// `leakbound watch`: placeholder until the watch command lands (docs/watch.md).
#include "leakbound/harness/watch_command.h"

#include <cstdio>

namespace leakbound::harness {

int WatchMain(int, char**) {
  std::fprintf(stderr, "leakbound watch: not built in this version\n");
  return 2;
}

}  // namespace leakbound::harness
