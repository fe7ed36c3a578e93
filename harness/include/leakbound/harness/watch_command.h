// `leakbound watch [options] -- CMD [ARGS...]`: hold the leak bound on a program leakbound did
// not write (see docs/watch.md). Its own entry point: main() hands it argv after "watch".
#pragma once

namespace leakbound::harness {

// argv[0] is "watch"; returns the process exit code (docs/watch.md lists them).
int WatchMain(int argc, char** argv);

}  // namespace leakbound::harness
