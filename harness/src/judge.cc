// Judge: Trace -> WorkloadResult (placeholder until the record/judge split lands).
