"""tierlab — simulation and modelling of memory-tier placement for compressed
inverted indexes. Subpackages: model, traces, analysis (top-level folders of
the repository); the CLI is `tierlab` (tierlab.cli)."""

__version__ = "0.1.0"
