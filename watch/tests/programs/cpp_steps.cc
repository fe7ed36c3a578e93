// A C++ program for `leakbound watch` (label watch): a memo in a std::map that keeps one entry a
// step (map-leak), and its twin that keeps the last 64 (map-clean). Built -O2 -g: the map's node
// allocation is the standard library's (inlined or not); the report must name this file's line.
//   cpp_steps map-leak|map-clean STEPS
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "leakbound/watch/step.h"

namespace {

std::map<int, std::string> g_memo;

__attribute__((noinline)) void Remember(int step) {
  g_memo.emplace(step, std::string(40, static_cast<char>('a' + step % 26)));  // the leak's line
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "map-leak") != 0 && std::strcmp(argv[1], "map-clean") != 0)) {
    std::fprintf(stderr, "usage: cpp_steps map-leak|map-clean STEPS\n");
    return 2;
  }
  const bool clean = std::strcmp(argv[1], "map-clean") == 0;
  const int steps = std::atoi(argv[2]);
  for (int step = 0; step < steps; ++step) {
    Remember(step);
    if (clean && g_memo.size() > 64) g_memo.erase(g_memo.begin());
    LEAKBOUND_STEP();
  }
  return 0;
}
