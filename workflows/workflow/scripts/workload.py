"""Rule workload: one query file from the corpus or, for an ingested corpus,
the index's term table (validate.term_source, validate.workload_file)."""
import sys
from pathlib import Path

sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

from tierlab.experiments import validate  # noqa: E402

sm = snakemake  # noqa: F821
out = Path(sm.output[0])
grid = validate.parse(sm.params.grid, "config: grid", check_index=False)
src, _ = validate.term_source(grid, Path(sm.input.index), corpus=Path(sm.input.corpus),
                              folder=out.parent)
path = validate.workload_file(out.parent, sm.params.workload, src)
assert path == out, (path, out)
