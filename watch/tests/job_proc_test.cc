// The watcher's reads of /proc (watch/watcher/src/job_proc.cc): a process's parent, and the
// processes below the watcher, as the scan for unobserved processes of a job uses them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>

#include "internal.h"

namespace leakbound::watch::detail {
namespace {

// A child that names itself NAME (the name in /proc/PID/stat's parentheses) and waits, killed
// with this process if a test ends early; the pipe says when the name is set. Reaped (killed and
// waited for) when it goes out of scope, whatever the test's assertions did.
class NamedChild {
 public:
  explicit NamedChild(const char *name) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::prctl(PR_SET_NAME, name);
      char byte = 1;
      [[maybe_unused]] ssize_t n = ::write(ready[1], &byte, 1);
      for (;;) ::pause();
    }
    ::close(ready[1]);  // a child that dies before it writes ends the read
    char byte = 0;
    if (pid_ > 0 && ::read(ready[0], &byte, 1) != 1) Reap();
    ::close(ready[0]);
  }
  ~NamedChild() { Reap(); }
  NamedChild(const NamedChild &) = delete;
  NamedChild &operator=(const NamedChild &) = delete;
  pid_t pid() const { return pid_; }

 private:
  void Reap() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  pid_t pid_ = -1;
};

TEST(JobProc, ParentOf_ReadsTheParentPastANameWithSpacesAndParentheses) {
  EXPECT_EQ(ParentOf(static_cast<std::uint64_t>(::getpid())),
            static_cast<std::uint64_t>(::getppid()));
  const NamedChild named("a) b (c) 9 9");
  const pid_t child = named.pid();
  ASSERT_GT(child, 0);
  EXPECT_EQ(ParentOf(static_cast<std::uint64_t>(child)), static_cast<std::uint64_t>(::getpid()));
  EXPECT_NE(ReadProcFile(static_cast<std::uint64_t>(child), "stat").find("(a) b (c) 9 9)"),
            std::string::npos);
}

// The pid of a child that has exited and been reaped (0 when fork failed).
std::uint64_t GonePid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  if (child < 0) return 0;
  int status = 0;
  ::waitpid(child, &status, 0);
  return static_cast<std::uint64_t>(child);
}

TEST(JobProc, ParentOf_IsZeroForAProcessThatIsGone) {
  const std::uint64_t gone = GonePid();
  ASSERT_GT(gone, 0u);
  EXPECT_EQ(ParentOf(gone), 0u);
  EXPECT_EQ(ReadProcFile(gone, "stat"), "");
}

// statm's resident size is what smaps_rollup's walk counts (its counters may lag by a few
// pages per CPU), and it follows the memory: 32 MiB touched more read 32 MiB more.
TEST(JobProc, ReadResident_AgreesWithSmapsRollup_AndFollowsTouchedMemory) {
  const auto self = static_cast<std::uint64_t>(::getpid());
  std::uint64_t rss = 0, pss = 0, resident = 0;
  ASSERT_TRUE(ReadPrivateMemory(self, rss, pss));
  ASSERT_TRUE(ReadResident(self, resident));
  EXPECT_NEAR(double(resident), double(rss), 4.0 * (1 << 20));
  constexpr std::size_t kBytes = std::size_t{32} << 20;
  void *block = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 1, kBytes);
  std::uint64_t touched = 0;
  ASSERT_TRUE(ReadResident(self, touched));
  EXPECT_NEAR(double(touched) - double(resident), double(kBytes), 4.0 * (1 << 20));
  ::munmap(block, kBytes);
}

TEST(JobProc, ReadResident_IsFalseForAProcessThatIsGone) {
  const std::uint64_t gone = GonePid();
  ASSERT_GT(gone, 0u);
  std::uint64_t rss = 7;
  EXPECT_FALSE(ReadResident(gone, rss));
}

TEST(JobProc, JobProcesses_ListsTheChildrenBelowThisProcessOnly) {
  const NamedChild named("job child");
  const pid_t child = named.pid();
  ASSERT_GT(child, 0);
  const auto job = JobProcesses();
  const auto found = job.find(static_cast<std::uint64_t>(child));
  ASSERT_NE(found, job.end());
  EXPECT_EQ(found->second, static_cast<std::uint64_t>(::getpid()));
  EXPECT_EQ(job.count(static_cast<std::uint64_t>(::getpid())), 0u);   // not below itself
  EXPECT_EQ(job.count(static_cast<std::uint64_t>(::getppid())), 0u);  // nor its parent
}

// A child forked by another thread of this process, with a grandchild of its own: the walk down
// finds both under the thread that forked, and agrees with the pass over every process's parent.
TEST(JobProc, JobProcesses_FindsGrandchildrenAndChildrenOfOtherThreads) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = -1;
  std::mutex lock;
  std::condition_variable checked;
  bool done = false;
  // The forking thread stays until the check is over: the child's parent death signal is sent
  // when the thread that forked it ends.
  std::thread forker([&] {
    const pid_t parent = ::getpid();
    child = ::fork();
    if (child == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      const pid_t middle = ::getpid();
      const pid_t grandchild = ::fork();
      if (grandchild == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != middle) ::_exit(1);
        for (;;) ::pause();
      }
      [[maybe_unused]] ssize_t n = ::write(ready[1], &grandchild, sizeof grandchild);
      for (;;) ::pause();
    }
    ::close(ready[1]);  // after the fork: a child that dies before it writes ends the read
    std::unique_lock<std::mutex> held(lock);
    checked.wait(held, [&] { return done; });
  });
  pid_t grandchild = -1;
  const bool started = ::read(ready[0], &grandchild, sizeof grandchild) == sizeof grandchild;
  ::close(ready[0]);
  const auto job = JobProcesses();
  const auto reference = JobProcessesByParent();
  {
    std::lock_guard<std::mutex> held(lock);
    done = true;
  }
  checked.notify_all();
  forker.join();
  if (child > 0) {
    ::kill(child, SIGKILL);  // the grandchild follows (its parent death signal)
    int status = 0;
    ::waitpid(child, &status, 0);
  }
  ASSERT_TRUE(started && child > 0 && grandchild > 0);
  ASSERT_EQ(job.count(static_cast<std::uint64_t>(child)), 1u);
  EXPECT_EQ(job.at(static_cast<std::uint64_t>(child)), static_cast<std::uint64_t>(::getpid()));
  ASSERT_EQ(job.count(static_cast<std::uint64_t>(grandchild)), 1u);
  EXPECT_EQ(job.at(static_cast<std::uint64_t>(grandchild)), static_cast<std::uint64_t>(child));
  EXPECT_EQ(job, reference);
}

}  // namespace
}  // namespace leakbound::watch::detail
