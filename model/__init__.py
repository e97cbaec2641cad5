"""tierlab.model — the SimPy model of APCache (docs/apcache.md; model/README.md).

One run: `config.validate(mapping)` or `config.load(path)`, then
`config.run(cfg)` and `config.write(result, out)`. The pieces: indexmeta
(index sizes and layout, synthetic or from an index), trace (the query
stream), device (storage timing rule), pagecache, tier, actors (the
processes), sim (one simulation), sweep (grids), reference (the reference
grids and trends), cache (the C caches).
"""
from __future__ import annotations

__all__ = ["actors", "cache", "config", "device", "indexmeta", "pagecache", "reference", "sim",
           "sweep", "tier", "trace"]
