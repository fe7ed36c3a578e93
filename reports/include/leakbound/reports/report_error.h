// ReportError: the one typed error of the reports layer. Loading, parsing, writing and diffing
// reports throw it; its message names the file, the JSON path of the problem and what to do,
// so a CI log line is enough to fix the input.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace leakbound::reports {

// GCC's -Wshadow flags a scoped enumerator that shares its name with a namespace-scope constant
// (kSchemaVersion in report.h) although the two can never be confused; Clang does not.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#endif
enum class ReportErrorKind {
  kMalformed,            // not JSON at all (syntax error before the end of the text)
  kTruncated,            // JSON ends early: empty file or an interrupted write
  kSchemaVersion,        // schema_version this build does not read
  kMissingField,         // a required field is absent or has the wrong JSON type
  kIo,                   // cannot open, read, write, fsync or rename a file
  kDeviceClassMismatch,  // diff of two reports from different device classes
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// "malformed", "truncated", ... (stable, for logs and tests).
std::string_view ReportErrorKindName(ReportErrorKind kind);

class ReportError : public std::runtime_error {
 public:
  using Kind = ReportErrorKind;

  // `message` is the complete sentence shown to the user (it already names `source`).
  // `source` is the file or stream the problem is in; `json_path` is where in the document
  // ("$.workloads[2].verdict"), empty when the problem is not at one place in the JSON.
  ReportError(ReportErrorKind kind, std::string source, std::string json_path,
              const std::string& message);

  ReportErrorKind kind() const { return kind_; }
  const std::string& source() const { return source_; }
  const std::string& json_path() const { return json_path_; }

 private:
  ReportErrorKind kind_;
  std::string source_;
  std::string json_path_;
};

}  // namespace leakbound::reports
