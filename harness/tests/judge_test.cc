// Judge tests on synthetic traces (placeholder until the record/judge split lands).
