// Tests of WriteFileAtomically / WriteReportAtomically: the target holds either the old or the
// complete new contents, and a failure leaves no temporary file behind. Failures are provoked
// with real system errors (a directory in the way, a missing folder, RLIMIT_FSIZE), which work
// even when the tests run as root.

#include <gtest/gtest.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "leakbound/reports/json.h"
#include "sample_report.h"

namespace leakbound::reports {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::vector<std::string> ListFolder(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ReportAtomicWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("report_atomic_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(ReportAtomicWriteTest, NewFile_HasExactContentsMode0644AndNoTempFileRemains) {
  WriteFileAtomically(dir_ / "out.txt", "hello\n");
  EXPECT_EQ(ReadFile(dir_ / "out.txt"), "hello\n");
  EXPECT_EQ(ListFolder(dir_), std::vector<std::string>{"out.txt"});
  struct stat info {};
  ASSERT_EQ(::stat((dir_ / "out.txt").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

TEST_F(ReportAtomicWriteTest, ExistingFile_IsReplacedWhole) {
  WriteFileAtomically(dir_ / "out.txt", std::string(10000, 'a'));
  WriteFileAtomically(dir_ / "out.txt", "short");
  EXPECT_EQ(ReadFile(dir_ / "out.txt"), "short");
  EXPECT_EQ(ListFolder(dir_), std::vector<std::string>{"out.txt"});
}

TEST_F(ReportAtomicWriteTest, EmptyContents_WritesEmptyFile) {
  WriteFileAtomically(dir_ / "empty.txt", "");
  EXPECT_TRUE(std::filesystem::exists(dir_ / "empty.txt"));
  EXPECT_EQ(std::filesystem::file_size(dir_ / "empty.txt"), 0u);
}

TEST_F(ReportAtomicWriteTest, TargetIsDirectory_ThrowsIoKeepsDirectoryAndRemovesTemp) {
  const std::filesystem::path target = dir_ / "report.json";
  std::filesystem::create_directory(target);
  std::ofstream(target / "keep.txt") << "inside";

  try {
    WriteReportAtomically(testing::MakeSampleReport(), target);
    FAIL() << "expected ReportError";
  } catch (const ReportError& error) {
    EXPECT_EQ(error.kind(), ReportErrorKind::kIo);
    const std::string message = error.what();
    EXPECT_EQ(message.rfind(target.string() + ": cannot rename temporary file ", 0), 0u) << message;
    EXPECT_NE(message.find("any previous file is unchanged"), std::string::npos);
  }
  EXPECT_TRUE(std::filesystem::is_directory(target));
  EXPECT_EQ(ReadFile(target / "keep.txt"), "inside");
  EXPECT_EQ(ListFolder(dir_), std::vector<std::string>{"report.json"});  // no ".report.json.tmp-*"
}

TEST_F(ReportAtomicWriteTest, MissingFolder_ThrowsIoNamingTheFolder) {
  const std::filesystem::path target = dir_ / "no" / "such" / "report.json";
  try {
    WriteFileAtomically(target, "x");
    FAIL() << "expected ReportError";
  } catch (const ReportError& error) {
    EXPECT_EQ(error.kind(), ReportErrorKind::kIo);
    EXPECT_EQ(std::string(error.what()).rfind(target.string() + ": cannot create a temporary file in " +
                                                  (dir_ / "no" / "such").string() +
                                                  " (No such file or directory);",
                                              0),
              0u)
        << error.what();
  }
  EXPECT_TRUE(ListFolder(dir_).empty());
}

// A write that fails half way (file size limit, like a full disk) keeps the old report intact.
TEST_F(ReportAtomicWriteTest, WriteFailsMidway_OldReportIntactAndNoTempFile) {
  const std::filesystem::path target = dir_ / "baseline.json";
  Report old_report;
  old_report.meta = testing::MakeCpuMetadata();
  WriteReportAtomically(old_report, target);
  const std::string old_text = ReadFile(target);
  ASSERT_LT(old_text.size(), 4096u);

  const Report big_report = testing::MakeSampleReport();
  ASSERT_GT(ReportToText(big_report).size(), 8192u);

  // Writes past 4 KiB now fail with EFBIG instead of killing the process with SIGXFSZ.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto saved_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message;
  bool threw_io = false;
  try {
    WriteReportAtomically(big_report, target);
  } catch (const ReportError& error) {
    threw_io = error.kind() == ReportErrorKind::kIo;
    message = error.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, saved_handler);

  EXPECT_TRUE(threw_io) << message;
  EXPECT_NE(message.find(": cannot write temporary file "), std::string::npos) << message;
  EXPECT_NE(message.find("(File too large)"), std::string::npos) << message;
  EXPECT_EQ(ReadFile(target), old_text);
  EXPECT_EQ(LoadReport(target), old_report);
  EXPECT_EQ(ListFolder(dir_), std::vector<std::string>{"baseline.json"});
}

// A folder the writer may not write into: an I/O error naming the cause, the old file intact and
// no temporary left. Root ignores folder permissions, so as root the write is tried in a child
// that has given up root (uid and gid 65534, "nobody").
TEST_F(ReportAtomicWriteTest, ReadOnlyFolder_ThrowsIoAndOldFileIntact) {
  const std::filesystem::path target = dir_ / "baseline.json";
  WriteFileAtomically(target, "old");
  namespace fs = std::filesystem;
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                            fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  // 0: threw kIo with "(Permission denied)"; 1: wrote; 2: another error; 3: could not drop root;
  // 4: could not read the old file (the folder itself out of reach: the test proves nothing).
  auto attempt = [&]() -> int {
    try {
      if (ReadFile(target) != "old") return 4;
    } catch (...) {
      return 4;
    }
    try {
      WriteFileAtomically(target, "new");
      return 1;
    } catch (const ReportError& error) {
      return error.kind() == ReportErrorKind::kIo &&
                     std::string(error.what()).find("(Permission denied)") != std::string::npos
                 ? 0
                 : 2;
    } catch (...) {
      return 2;
    }
  };
  int outcome = -1;
  if (::geteuid() != 0) {
    outcome = attempt();
  } else {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
          ::setresuid(65534, 65534, 65534) != 0 || ::geteuid() == 0) {
        ::_exit(3);
      }
      ::_exit(attempt());
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    outcome = WEXITSTATUS(status);
  }
  fs::permissions(dir_, fs::perms::owner_all);
  EXPECT_EQ(outcome, 0) << "0: refused with (Permission denied), 1: wrote, 2: another error, "
                           "3: could not give up root, 4: the folder out of reach";
  EXPECT_EQ(ReadFile(target), "old");
  EXPECT_EQ(ListFolder(dir_), std::vector<std::string>{"baseline.json"});
}

// PendingFile: nothing is in place until Commit, a pending file dropped (or moved from and
// dropped) leaves the folder as it was, and files committed in turn appear in that order.
TEST_F(ReportAtomicWriteTest, PendingFile_IsInPlaceOnlyAfterCommit_AndDroppedLeavesNothing) {
  WriteFileAtomically(dir_ / "trace.json", "old trace\n");
  {
    PendingFile dropped(dir_ / "trace.json", "new trace\n");
    EXPECT_EQ(ListFolder(dir_).size(), 2u);  // the old file and a hidden temporary one
    EXPECT_EQ(ReadFile(dir_ / "trace.json"), "old trace\n");
  }
  EXPECT_EQ(ListFolder(dir_), std::vector<std::string>{"trace.json"});
  EXPECT_EQ(ReadFile(dir_ / "trace.json"), "old trace\n");

  PendingFile trace(dir_ / "trace.json", "new trace\n");
  PendingFile report(dir_ / "report.json", "new report\n");
  PendingFile moved = std::move(trace);
  EXPECT_THROW(trace.Commit(), ReportError);  // moved from: nothing to put in place
  moved.Commit();
  EXPECT_EQ(ReadFile(dir_ / "trace.json"), "new trace\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "report.json"));
  report.Commit();
  EXPECT_EQ(ReadFile(dir_ / "report.json"), "new report\n");
  EXPECT_EQ(ListFolder(dir_), (std::vector<std::string>{"report.json", "trace.json"}));
}

// A rename that fails (a folder where the file goes) throws kIo and removes the temporary file.
TEST_F(ReportAtomicWriteTest, PendingFile_CommitOverAFolder_ThrowsIoAndLeavesNoTempFile) {
  std::filesystem::create_directories(dir_ / "trace.json" / "inside");
  PendingFile trace(dir_ / "trace.json", "new trace\n");
  try {
    trace.Commit();
    ADD_FAILURE() << "Commit over a non-empty folder did not throw";
  } catch (const ReportError& e) {
    EXPECT_EQ(e.kind(), ReportErrorKind::kIo);
  }
  EXPECT_EQ(ListFolder(dir_), std::vector<std::string>{"trace.json"});
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "trace.json" / "inside"));
}

// CommitInOrder: every file in place, in two folders; a rename that fails part way leaves the
// files before it in place and the one after it untouched, with no temporary file left.
TEST_F(ReportAtomicWriteTest, CommitInOrder_PutsAllInPlace_AndStopsAtAFailedRename) {
  std::filesystem::create_directories(dir_ / "junit");
  WriteFileAtomically(dir_ / "report.md", "old md\n");
  {
    PendingFile trace(dir_ / "trace.json", "trace\n");
    PendingFile report(dir_ / "report.json", "report\n");
    PendingFile junit(dir_ / "junit" / "results.xml", "<testsuites/>\n");
    const std::vector<PendingFile*> files = {&trace, &report, &junit};
    CommitInOrder(files);
    EXPECT_THROW(report.Commit(), ReportError);  // committed: nothing left to put in place
  }
  EXPECT_EQ(ReadFile(dir_ / "trace.json"), "trace\n");
  EXPECT_EQ(ReadFile(dir_ / "report.json"), "report\n");
  EXPECT_EQ(ReadFile(dir_ / "junit" / "results.xml"), "<testsuites/>\n");

  std::filesystem::create_directories(dir_ / "report.html" / "inside");  // cannot be renamed over
  {
    PendingFile report(dir_ / "report.json", "report 2\n");
    PendingFile html(dir_ / "report.html", "<html>\n");
    PendingFile markdown(dir_ / "report.md", "new md\n");
    const std::vector<PendingFile*> files = {&report, &html, &markdown};
    try {
      CommitInOrder(files);
      ADD_FAILURE() << "CommitInOrder over a non-empty folder did not throw";
    } catch (const ReportError& e) {
      EXPECT_EQ(e.kind(), ReportErrorKind::kIo);
      EXPECT_NE(std::string(e.what()).find("report.html"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ReadFile(dir_ / "report.json"), "report 2\n");
  EXPECT_EQ(ReadFile(dir_ / "report.md"), "old md\n");
  EXPECT_EQ(ListFolder(dir_), (std::vector<std::string>{"junit", "report.html", "report.json",
                                                         "report.md", "trace.json"}));
}

TEST_F(ReportAtomicWriteTest, RelativePathWithoutFolder_WritesIntoCurrentDirectory) {
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  WriteFileAtomically("plain.txt", "here");
  std::filesystem::current_path(previous);
  EXPECT_EQ(ReadFile(dir_ / "plain.txt"), "here");
}

}  // namespace
}  // namespace leakbound::reports
