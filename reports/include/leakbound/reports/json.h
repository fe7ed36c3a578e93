// JSON (de)serialisation of a Report (schema: docs/report-schema.md) and atomic file writes.
// Reading is strict and total: any input, however broken, yields a Report or a ReportError that
// names the file, the JSON path and what to do; it never crashes or reads out of bounds.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "leakbound/reports/report.h"
#include "leakbound/reports/report_error.h"

namespace leakbound::reports {

// The report as a JSON value. Field names are the struct field names; numbers that are not
// finite (NaN, +-inf: "not measured") become null.
nlohmann::json ToJson(const Report& report);

// The report as text, ready to commit as a baseline: objects indented by two spaces, arrays of
// numbers or strings (series values, block ends) kept on one line so that a series of thousands
// of samples stays one compact array. Keys appear in the struct's field order. Ends with '\n'.
std::string ReportToText(const Report& report);

// Reads a report from a JSON value. Throws ReportError:
//   kSchemaVersion  schema_version is not kSchemaVersion,
//   kMissingField   a required field is absent or has the wrong type (message names the path).
// Unknown fields are ignored (a newer writer may add optional fields within one version).
// `source_name` is used in error messages only (a file name, "stdin", ...).
Report ReportFromJson(const nlohmann::json& json, std::string_view source_name = "report");

// Parses report text. In addition to ReportFromJson's errors, throws ReportError
//   kTruncated  the text is empty or ends before the JSON document is complete,
//   kMalformed  any other JSON syntax error (message gives line and column).
Report ParseReport(std::string_view text, std::string_view source_name);

// Reads and parses a report file; kIo when the file cannot be opened or read.
Report LoadReport(const std::filesystem::path& path);

// Writes `contents` to `path` so that readers see either the old file or the complete new one:
// writes a temporary file in the same folder, fsyncs it, renames it over `path`, then fsyncs the
// folder. On any failure the temporary file is removed, an existing `path` is left untouched and
// ReportError kIo is thrown (naming the path, the failed step and the system's reason).
// The new file gets mode 0644.
void WriteFileAtomically(const std::filesystem::path& path, std::string_view contents);

// WriteFileAtomically in two steps, for a writer of several files that chooses the order in
// which they appear: the constructor writes `contents` to a temporary file beside `path` and
// fsyncs it (ReportError kIo as WriteFileAtomically on failure, leaving nothing behind); Commit()
// renames it over `path` and fsyncs the folder. Destroyed uncommitted, the temporary file is
// removed and `path` is untouched.
class PendingFile {
 public:
  PendingFile(const std::filesystem::path& path, std::string_view contents);
  PendingFile(PendingFile&& other) noexcept;
  PendingFile& operator=(PendingFile&& other) noexcept;
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  ~PendingFile();
  void Commit();

 private:
  friend void CommitInOrder(std::span<PendingFile* const> files);
  // Renames the temporary file over the target (Commit without the folder's fsync).
  void PutInPlace();
  void Discard() noexcept;
  std::filesystem::path path_;
  std::string temp_;  // empty once committed, discarded or moved from
};

// Commits `files` in the order given, then makes their renames durable with one fsync of each
// folder they are in instead of one per file (a watched program's four reports: three fsyncs
// fewer at its end). A failed rename throws as Commit does: the files before it are in place, it
// and the ones after it are not (their temporary files are removed when they are destroyed).
void CommitInOrder(std::span<PendingFile* const> files);

// json.dump(indent) with invalid UTF-8 replaced by U+FFFD: the same text for a document without
// binary values (whose form is not reproduced), written faster (whole numbers, most of a trace's
// values, without nlohmann's float formatting). A PackedNumbers value is written as the array of
// numbers it holds, as json(values) would be.
std::string DumpJson(const nlohmann::json& json, int indent);
// DumpJson with every PackedNumbers series on one line ("[1.0,2.0,3.0]") instead of a number a
// line: the same document, 2.3 times shorter for a 20,000-step trace (trace.json).
std::string DumpJsonSeriesInline(const nlohmann::json& json, int indent);

// A series of numbers as one value (a binary value of the writers' own subtype), for documents
// that DumpJson writes: a 20,000-step series is one value to build and destroy instead of 20,000.
// Only DumpJson spells it out; any other reader of the document sees a binary value.
nlohmann::json PackedNumbers(const std::vector<double>& values);

// WriteFileAtomically(path, ReportToText(report)).
void WriteReportAtomically(const Report& report, const std::filesystem::path& path);

}  // namespace leakbound::reports
