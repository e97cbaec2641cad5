"""Rule figure_qps_vs_index_size: the query runs of every codec and workload
as the document analysis/index_qps_vs_size.py draws."""
import sys
from pathlib import Path

sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

from tierlab.analysis.index_qps_vs_size import plot_qps_vs_size  # noqa: E402
from tierlab.engine.index import postings_bytes, read_manifest  # noqa: E402
from tierlab.traces.schema import read_table  # noqa: E402

sm = snakemake  # noqa: F821
wls = sm.params.workloads
codecs, n = [], len(wls)
identical = True
for i, codec in enumerate(sm.params.codecs):
    runs = [read_table(p)[1].iloc[0] for p in sm.input.runs[i * n:(i + 1) * n]]
    scored = [read_table(p)[1]["postings_scored"].tolist()
              for p in sm.input.queries[i * n:(i + 1) * n]]
    if i == 0:
        first = scored
    identical &= scored == first  # the same postings scored by every query of every codec
    codecs.append({"codec": codec, "postings_bytes": postings_bytes(sm.input.index[i]),
                   "queries": [{"type": w["type"], "class": w["class"], "qps": float(r["qps"])}
                               for w, r in zip(wls, runs)]})
block = read_manifest(Path(sm.input.index[0])).get("block_size", 0)
doc = {"config": {"types": sorted({w["type"] for w in wls}, key=["single", "and"].index),
                  "classes": sorted({w["class"] for w in wls}), "block_size": block},
       "codecs": codecs, "corpus": {"bytes": Path(sm.input.corpus).stat().st_size},
       "workloads": [{"type": w["type"], "class": w["class"], "queries": w["queries"]}
                     for w in wls],
       "results_identical": identical}
plot_qps_vs_size(doc, sm.output[0])
