"""Rule model: the model side of one cell (validate.model_row)."""
import sys
from pathlib import Path

sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

from tierlab.engine.index import postings_bytes  # noqa: E402
from tierlab.experiments import validate  # noqa: E402
from tierlab.model.costs import Costs  # noqa: E402

sm = snakemake  # noqa: F821
grid = validate.parse(sm.params.grid, "config: grid", check_index=False)
row = next(r for r in grid.rows if r.id == sm.wildcards.row)
index = Path(sm.input.index)
validate.model_row(row, grid.out, index=index, workload=Path(sm.input.workload),
                   costs=Costs.load(sm.input.costs), costs_path=Path(sm.input.costs), real=None,
                   index_bytes=postings_bytes(index), cpu=grid.cpu == "measured")
