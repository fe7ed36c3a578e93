// Reports on disk (see json.h): loading a report with errors that name the file and say what
// to do, and writing any file atomically (a temporary file in the same folder, fsync'd, then
// renamed over the target), so a failure or a kill never leaves a half-written file.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "leakbound/reports/json.h"
#include "leakbound/reports/report_error.h"

namespace leakbound::reports {
namespace {

std::string ErrnoText(int error) {
  return std::error_code(error, std::generic_category()).message();
}

[[noreturn]] void ThrowIo(const std::filesystem::path& path, const std::string& what_failed,
                          int error, std::string_view remedy) {
  throw ReportError(
      ReportErrorKind::kIo, path.string(), "",
      path.string() + ": " + what_failed + " (" + ErrnoText(error) + "); " + std::string(remedy));
}

// Closes a descriptor and unlinks the temporary file unless Release()d; the failure path of
// WriteFileAtomically relies on it to leave nothing behind.
class TempFileGuard {
 public:
  TempFileGuard(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  ~TempFileGuard() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // Closes the descriptor; returns 0 or the errno of close().
  int Close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }
  void KeepFile() { path_.clear(); }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

Report LoadReport(const std::filesystem::path& path) {
  constexpr std::string_view kRemedy = "check the path, or create the report with `leakbound run`";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ThrowIo(path, "cannot open report", errno, kRemedy);
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      const int read_error = errno;  // EISDIR for a folder
      ::close(fd);
      ThrowIo(path, "cannot read report", read_error, kRemedy);
    }
    if (got == 0) break;
    contents.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return ParseReport(contents, path.string());
}

namespace {
constexpr std::string_view kWriteRemedy =
    "check that the folder exists and is writable and that the disk is not full; any previous "
    "file is unchanged";
}  // namespace

PendingFile::PendingFile(const std::filesystem::path& path, std::string_view contents)
    : path_(path) {
  const std::filesystem::path folder =
      path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  // Same folder as the target: rename() is atomic only within one file system.
  std::string temp_name = ".";  // hidden: a folder listing shows only finished files
  temp_name += path.filename().string();
  temp_name += ".tmp-XXXXXX";
  std::string temp_template = (folder / temp_name).string();
  const int fd = ::mkstemp(temp_template.data());
  if (fd < 0) {
    ThrowIo(path, "cannot create a temporary file in " + folder.string(), errno, kWriteRemedy);
  }
  TempFileGuard temp(fd, temp_template);

  const char* data = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    const ssize_t written = ::write(temp.fd(), data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      ThrowIo(path, "cannot write temporary file " + temp.path(), errno, kWriteRemedy);
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
  if (::fchmod(temp.fd(), 0644) != 0) {
    ThrowIo(path, "cannot set the mode of temporary file " + temp.path(), errno, kWriteRemedy);
  }
  if (::fsync(temp.fd()) != 0) {
    ThrowIo(path, "cannot fsync temporary file " + temp.path(), errno, kWriteRemedy);
  }
  if (const int close_error = temp.Close(); close_error != 0) {
    ThrowIo(path, "cannot close temporary file " + temp.path(), close_error, kWriteRemedy);
  }
  temp_ = temp.path();
  temp.KeepFile();
}

PendingFile::PendingFile(PendingFile&& other) noexcept
    : path_(std::move(other.path_)), temp_(std::exchange(other.temp_, std::string())) {}

PendingFile& PendingFile::operator=(PendingFile&& other) noexcept {
  if (this != &other) {
    Discard();
    path_ = std::move(other.path_);
    temp_ = std::exchange(other.temp_, std::string());
  }
  return *this;
}

PendingFile::~PendingFile() { Discard(); }

void PendingFile::Discard() noexcept {
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void PendingFile::PutInPlace() {
  if (temp_.empty()) {
    throw ReportError(ReportErrorKind::kIo, path_.string(), "",
                      path_.string() + ": nothing to put in place (committed or moved from)");
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    const std::string temp = temp_;
    Discard();
    ThrowIo(path_, "cannot rename temporary file " + temp + " over the target", error,
            kWriteRemedy);
  }
  temp_.clear();
}

namespace {
// Makes the renames in `folder` durable. Best effort: the files are complete and in place already.
void SyncFolder(const std::filesystem::path& folder) {
  const int folder_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder_fd >= 0) {
    ::fsync(folder_fd);
    ::close(folder_fd);
  }
}

std::filesystem::path FolderOf(const std::filesystem::path& path) {
  return path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
}
}  // namespace

void PendingFile::Commit() {
  PutInPlace();
  SyncFolder(FolderOf(path_));
}

void CommitInOrder(std::span<PendingFile* const> files) {
  std::vector<std::filesystem::path> folders;  // of the files put in place
  const auto sync_all = [&folders] {
    for (const std::filesystem::path& folder : folders) SyncFolder(folder);
  };
  try {
    for (PendingFile* file : files) {
      file->PutInPlace();
      std::filesystem::path folder = FolderOf(file->path_);
      if (std::find(folders.begin(), folders.end(), folder) == folders.end()) {
        folders.push_back(std::move(folder));
      }
    }
  } catch (...) {
    sync_all();  // the ones already in place stay, durably
    throw;
  }
  sync_all();
}

void WriteFileAtomically(const std::filesystem::path& path, std::string_view contents) {
  PendingFile(path, contents).Commit();
}

void WriteReportAtomically(const Report& report, const std::filesystem::path& path) {
  WriteFileAtomically(path, ReportToText(report));
}

}  // namespace leakbound::reports
