"""Rule stage_times: every job's `benchmark:` file (wall seconds, peak RSS)
summed per stage (the folder under benchmarks/)."""
import sys
from pathlib import Path

sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

import pandas as pd  # noqa: E402

sm = snakemake  # noqa: F821
rows = []
for f in sorted(Path(sm.params.benchmarks).glob("*/**/*.tsv")):
    b = pd.read_csv(f, sep="\t")
    stage = f.relative_to(sm.params.benchmarks).parts[0]
    rows.append({"stage": stage, "job": f.stem, "s": float(b["s"].iloc[0]),
                 "max_rss_mb": pd.to_numeric(b["max_rss"], errors="coerce").iloc[0]})
t = pd.DataFrame(rows).groupby("stage").agg(jobs=("job", "count"), seconds=("s", "sum"),
                                             max_rss_mb=("max_rss_mb", "max")).reset_index()
t["seconds"] = t["seconds"].round(1)
print(t.to_string(index=False))
tmp = Path(sm.output[0]).with_name(".stage_times.csv.tmp")
t.to_csv(tmp, index=False)
tmp.replace(sm.output[0])
