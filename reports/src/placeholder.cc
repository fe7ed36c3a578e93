// replaced by the reports implementation
