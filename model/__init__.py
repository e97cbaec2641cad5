"""tierlab.model — the SimPy model of APCache (APCACHE.md). Not yet written (issue 4)."""
