"""Rule figure_cells: the APCache cells, runtime and model side by side
(analysis/cache_validation.py); DRAM saved is the `dram_saved` trend of
tierlab.experiments.reference on each side's runs."""
import sys
from pathlib import Path

sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

import pandas as pd  # noqa: E402

from tierlab.analysis import cache_validation as cv  # noqa: E402
from tierlab.experiments.reference import dram_saved  # noqa: E402
from tierlab.traces.schema import read_table  # noqa: E402

sm = snakemake  # noqa: F821
runs = pd.concat([read_table(p)[1] for p in sm.input.runs], ignore_index=True)
timelines = pd.concat([read_table(Path(p).with_name("cache_timeline.parquet"))[1]
                       for p in sm.input.timelines
                       if Path(p).with_name("cache_timeline.parquet").exists()],
                      ignore_index=True)
cv.plot_cache_curves(runs, sm.output.curves)
cv.plot_miss_rate(runs, sm.output.miss)
cv.plot_lookahead_timeline(runs, timelines, sm.output.lookahead)
numbers = {side: dram_saved(runs[runs["source"] == side], rp=sm.params.rp)["numbers"]
           for side in ("measured", "model")}
print(numbers)
cv.plot_dram_saved(numbers, sm.output.dram)
