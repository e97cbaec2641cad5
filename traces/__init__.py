"""tierlab.traces — the versioned result/trace schema and its readers (issue 3)."""
