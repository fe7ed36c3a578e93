// ReportError: the reports layer's typed error (see report_error.h).

#include "leakbound/reports/report_error.h"

#include <utility>

namespace leakbound::reports {

std::string_view ReportErrorKindName(ReportErrorKind kind) {
  switch (kind) {
    case ReportErrorKind::kMalformed:
      return "malformed";
    case ReportErrorKind::kTruncated:
      return "truncated";
    case ReportErrorKind::kSchemaVersion:
      return "schema-version";
    case ReportErrorKind::kMissingField:
      return "missing-field";
    case ReportErrorKind::kIo:
      return "io";
    case ReportErrorKind::kDeviceClassMismatch:
      return "device-class-mismatch";
  }
  return "unknown";
}

ReportError::ReportError(ReportErrorKind kind, std::string source, std::string json_path,
                         const std::string& message)
    : std::runtime_error(message),
      kind_(kind),
      source_(std::move(source)),
      json_path_(std::move(json_path)) {}

}  // namespace leakbound::reports
