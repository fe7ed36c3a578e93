// Trace: what a recording produced (placeholder until the record/judge split lands).
