"""Rule validation: all cells collected with their noise floor
(validate.finish) and scored (analysis/validation_report.analyse), as
`tierlab validate` does."""
import sys

sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

from tierlab.analysis.validation_report import analyse  # noqa: E402
from tierlab.experiments import validate  # noqa: E402

sm = snakemake  # noqa: F821
grid = validate.parse(sm.params.grid, "config: grid", check_index=False)
done = validate.finish(grid)
res = analyse(done.out, done.measured, done.model, done.twins, done.notes)
print(res["text"])
for n in res["doc"]["notes"]:
    print(f"note: {n}")
