# The config checked against schemas/config.schema.yaml, and what the rules
# share: the results folder, the codecs, the workloads and the APCache cells
# (the rows of a `tierlab validate` grid: the same ids, the same code).
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

validate(config, "../schemas/config.schema.yaml")

from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.experiments import validate as tl_validate  # noqa: E402
from tierlab.experiments.validate.grid import workload_name, workloads_of  # noqa: E402

# the tierlab of the Python that runs Snakemake (a venv need not be on PATH)
TL = f"{shlex.quote(sys.executable)} -m tierlab"
R = f"results/{config.get('name', 'demo')}"
CODECS = list(config["codecs"])
CELL_CODEC = CODECS[0]  # the index the APCache cells run on
try:
    WORKLOADS = {workload_name(w): w for w in workloads_of(config["workload"])}
except TierlabError as e:
    raise WorkflowError(f"config: {e}")


def grid_doc() -> dict:
    """The `tierlab validate` grid of the APCache cells: the config's grid on
    the first codec's index and the workload of grid.query_type."""
    g = dict(config["grid"])
    qtype = g.pop("query_type", None)
    g.pop("costs", None)  # the costs rule's (default is not a grid's)
    wl = dict(config["workload"])
    types = wl.get("type", "single")
    wl["type"] = qtype or (types[0] if isinstance(types, list) else types)
    if "generate" in config["corpus"]:  # the ids `tierlab validate` gives the same grid
        gen = config["corpus"]["generate"]
        index = {"generate": {"size": gen.get("size", "12MB"), "codec": CELL_CODEC,
                              "seed": gen.get("seed", 0)}}
    else:
        index = f"{R}/index/{CELL_CODEC}"
    return {**g, "index": index, "workload": wl, "out": f"{R}/validate"}


try:
    GRID = tl_validate.parse(grid_doc(), "config: grid", check_index=False)
except TierlabError as e:
    raise WorkflowError(str(e))
if any(r.values["device"] == "real" for r in GRID.rows):
    raise WorkflowError("config: grid.device: `real` needs the disk probe of `tierlab validate` "
                        "(run it there); the workflow takes the device specs of sim-configs/")
ROWS = {r.id: r for r in GRID.rows}
CELL_WORKLOAD = workload_name(GRID.rows[0].workload)


def corpus_command() -> str:
    c = config["corpus"]
    if "generate" in c:
        g = c["generate"]
        return f"{TL} corpus generate --size {g.get('size', '12MB')} --seed {g.get('seed', 0)}"
    files = " ".join(shlex.quote(str(f)) for f in c["ingest"]["files"])
    return f"{TL} corpus ingest --format {c['ingest'].get('format', 'auto')} {files}"


def row_workload(wildcards):
    return f"{R}/workloads/{workload_name(ROWS[wildcards.row].workload)}.queries"


def all_outputs() -> list:
    out = [f"{R}/bench/codecs.json", f"{R}/validate/validation.csv", f"{R}/stage_times.csv"]
    out += expand(f"{R}/query/{{codec}}/{{wl}}/run.parquet", codec=CODECS, wl=WORKLOADS)
    out += FIGURES
    out += memory_tier_outputs()
    return out
