// The watcher's reads of /proc (watch/watcher/src/job_proc.cc): a process's parent, and the
// processes below the watcher, as the scan for unobserved processes of a job uses them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "internal.h"

namespace leakbound::watch::detail {
namespace {

// A child that names itself NAME (the name in /proc/PID/stat's parentheses) and waits to be
// killed; the pipe says when the name is set.
pid_t NamedChild(const char *name) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_NAME, name);
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(ready[1], &byte, 1);
    for (;;) ::pause();
  }
  char byte = 0;
  [[maybe_unused]] ssize_t n = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  ::close(ready[1]);
  return child;
}

void Reap(pid_t child) {
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
}

TEST(JobProc, ParentOf_ReadsTheParentPastANameWithSpacesAndParentheses) {
  EXPECT_EQ(ParentOf(static_cast<std::uint64_t>(::getpid())),
            static_cast<std::uint64_t>(::getppid()));
  const pid_t child = NamedChild("a) b (c) 9 9");
  ASSERT_GT(child, 0);
  EXPECT_EQ(ParentOf(static_cast<std::uint64_t>(child)), static_cast<std::uint64_t>(::getpid()));
  EXPECT_NE(ReadProcFile(static_cast<std::uint64_t>(child), "stat").find("(a) b (c) 9 9)"),
            std::string::npos);
  Reap(child);
}

TEST(JobProc, ParentOf_IsZeroForAProcessThatIsGone) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(ParentOf(static_cast<std::uint64_t>(child)), 0u);
  EXPECT_EQ(ReadProcFile(static_cast<std::uint64_t>(child), "stat"), "");
}

TEST(JobProc, JobProcesses_ListsTheChildrenBelowThisProcessOnly) {
  const pid_t child = NamedChild("job child");
  ASSERT_GT(child, 0);
  const auto job = JobProcesses();
  const auto found = job.find(static_cast<std::uint64_t>(child));
  ASSERT_NE(found, job.end());
  EXPECT_EQ(found->second, static_cast<std::uint64_t>(::getpid()));
  EXPECT_EQ(job.count(static_cast<std::uint64_t>(::getpid())), 0u);   // not below itself
  EXPECT_EQ(job.count(static_cast<std::uint64_t>(::getppid())), 0u);  // nor its parent
  Reap(child);
}

}  // namespace
}  // namespace leakbound::watch::detail
