/* A static executable for the watch tests (the preload cannot enter it): sleeps SECONDS. */
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 0.6;
  struct timespec pause_time = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  nanosleep(&pause_time, NULL);
  return 0;
}
