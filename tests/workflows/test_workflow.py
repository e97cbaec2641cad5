"""The workflow (workflows/): its config schema, its rows against
`tierlab validate`'s, a local run of config/tiny.yaml (every stage's outputs
are result tables of traces/schema.yaml), and its report in Chromium."""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from workflow_run import WF, snakemake
from tierlab.core import runspec
from tierlab.traces.schema import read_table

SCHEMA = WF / "workflow" / "schemas" / "config.schema.yaml"
# the figures and tables of the report, with the rule file naming their captions
REPORTED = ["codec-pareto.png", "qps-vs-index-size.png", "cache-curves.png", "miss-rate.png",
            "lookahead-timeline.png", "dram-saved.png", "parity.png",
            "validation-targets.csv", "stage_times.csv", "placements.png"]


def test_schema_refers_to_the_run_spec_instead_of_copying_it():
    doc = yaml.safe_load(SCHEMA.read_text())
    grid = doc["properties"]["grid"]["properties"]
    run_keys = set(runspec.keys())
    shared = [k for k in grid if k in run_keys and k != "costs"]
    assert len(shared) >= 8
    for k in shared:
        text = json.dumps(grid[k])
        assert f"run.schema.yaml#/properties/{k}" in text, k
        assert "enum" not in text and "pattern" not in text, f"{k}: copied from the run spec"


@pytest.mark.parametrize("bad, message", [
    ({"grid": {"config": "no-such-config"}}, "no-such-config"),
    ({"grid": {"cache_fraction": 0.1, "bogus": 1}}, "bogus"),
    ({"codecs": []}, "codecs"),
])
def test_a_bad_config_is_refused_naming_the_key(tmp_path, bad, message):
    cfg = yaml.safe_load((WF / "config" / "tiny.yaml").read_text())
    for k, v in bad.items():
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) else v
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    r = snakemake(tmp_path, "-n", "--configfile", tmp_path / "c.yaml")
    assert r.returncode != 0
    assert message in r.stdout + r.stderr


@pytest.mark.parametrize("memory, message", [
    ({"backend": "dramsim"}, "dramsim"),
    ({"backend": "vans", "binary": ""}, "TIERLAB_VANS"),
])
def test_a_memory_tier_backend_it_cannot_run_is_refused(tmp_path, monkeypatch, memory, message):
    monkeypatch.delenv("TIERLAB_VANS", raising=False)
    cfg = yaml.safe_load((WF / "config" / "tiny.yaml").read_text())
    cfg["memory_tiers"] = memory
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    r = snakemake(tmp_path, "-n", "--configfile", tmp_path / "c.yaml")
    assert r.returncode != 0
    assert message in r.stdout + r.stderr


def test_memory_tier_jobs_per_codec_workload_and_tier(tmp_path):
    cfg = yaml.safe_load((WF / "config" / "tiny.yaml").read_text())
    r = snakemake(tmp_path, "-n", "--configfile", WF / "config" / "tiny.yaml")
    assert r.returncode == 0, r.stdout[-3000:]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", r.stdout, re.M))
    n = len(cfg["codecs"])  # one workload
    assert int(jobs["trace_memory"]) == int(jobs["memory_stream"]) == n
    assert int(jobs["memory_placements"]) == n
    assert int(jobs["sim_run"]) == n * len(cfg["memory_tiers"]["tiers"])


def test_cells_are_the_rows_of_tierlab_validate_on_the_same_grid(tmp_path):
    """The workflow's APCache jobs are `tierlab validate`'s rows: same ids."""
    from tierlab.experiments import validate

    cfg = yaml.safe_load((WF / "config" / "config.yaml").read_text())
    r = snakemake(tmp_path, "-n", "--configfile", WF / "config" / "config.yaml")
    assert r.returncode == 0, r.stdout[-3000:]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", r.stdout, re.M))
    planned = set(re.findall(r"wildcards: row=([0-9a-f]+)", r.stdout))
    g = dict(cfg["grid"])
    g.pop("query_type")
    gen = cfg["corpus"]["generate"]
    grid = validate.parse({**g, "index": {"generate": {**gen, "codec": cfg["codecs"][0]}},
                           "workload": {**cfg["workload"], "type": "single"}})
    assert planned == {row.id for row in grid.rows}
    assert int(jobs["apcache"]) == int(jobs["model"]) == len(grid.rows) == 24
    assert int(jobs["index"]) == len(cfg["codecs"])


def test_tiny_config_runs_locally_into_result_tables(tiny_local):
    r = tiny_local / "results" / "tiny"
    for table, f in [("run", "query/pfor-delta256/single-H-n30-rp0.5-s1/run.parquet"),
                     ("query", "query/vbyte/single-H-n30-rp0.5-s1/query.parquet"),
                     ("cache_run", "validate/measured.parquet"),
                     ("cache_run", "validate/model.parquet"),
                     ("validation", "validate/validation.csv"),
                     ("memtrace_summary",
                      "memory/trace/vbyte/single-H-n30-rp0.5-s1/memtrace_summary.parquet"),
                     ("sim_run", "memory/sim/optane-dcpmm-g1/pfor-delta256/single-H-n30-rp0.5-s1/"
                      "sim_run.csv")]:
        name, df = read_table(r / f)
        assert name == table and len(df), f
    rows = sorted((r / "validate" / "rows").iterdir())
    assert len(rows) == 4
    for row in rows:
        for side in ("measured", "model"):
            assert read_table(row / side / "cache_run.parquet")[0] == "cache_run"
    stages = {line.split(",")[0] for line in (r / "stage_times.csv").read_text().splitlines()[1:]}
    assert {"corpus", "index", "workloads", "query", "costs", "bench", "apcache", "model",
            "validation", "figures", "memory"} <= stages
    # one benchmark file per job: every rule has `benchmark:`
    assert len(list((r / "benchmarks" / "apcache").glob("*.tsv"))) == 4


def _report(tiny_local) -> tuple[Path, str]:
    html = tiny_local / "report.html"
    if not html.exists():
        r = snakemake(tiny_local, "--configfile", WF / "config" / "tiny.yaml", "--report", html)
        assert r.returncode == 0, r.stderr[-3000:]
    return html, html.read_text()


def _results(text: str) -> dict:
    """The report's embedded results: {path: {caption, data_uri, ...}}."""
    i = text.index('<script id="results">')
    i = text.index("var results = {", i) + len("var results = ")
    return json.JSONDecoder().raw_decode(text[i:])[0]


def test_report_embeds_every_figure_with_its_caption(tiny_local):
    _, text = _report(tiny_local)
    assert not re.search(r"<(script|img|link)[^>]+(src|href)=\"https?:", text), "not self-contained"
    res = {Path(k).name: v for k, v in _results(text).items()}
    assert sorted(res) == sorted(REPORTED)
    for name, v in res.items():
        kind, data = re.match(r"data:([a-z/]+);.*base64,(.*)$", v["data_uri"], re.S).groups()
        raw = base64.b64decode(data)
        if name.endswith(".png"):
            assert kind == "image/png" and raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 5000
        else:
            assert kind == "text/csv" and raw.count(b"\n") >= 2
        assert len(re.sub("<[^>]+>", "", v["caption"]).split()) >= 15, f"{name}: no caption"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian `chromium`, "
                    "installed by `make test-deps`): the report is not rendered")
def test_report_renders_in_chromium_with_no_missing_image(tiny_local, tmp_path):
    html, text = _report(tiny_local)
    shot = tmp_path / "report.png"
    run = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000",
           "--virtual-time-budget=10000"]
    subprocess.run([*run, f"--screenshot={shot}", html.as_uri()], capture_output=True,
                   timeout=120, check=True)
    from PIL import Image

    with Image.open(shot) as im:  # the page was drawn: not one flat colour
        assert im.size == (1400, 1000)
        assert len(im.convert("L").getcolors(1 << 16)) > 20
    dom = subprocess.run([*run, "--dump-dom", html.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    for category in ("1. Codecs", "2. APCache", "4. Validation"):
        assert category in dom, f"{category} not rendered"
    # every embedded figure decodes in the browser (naturalWidth > 0)
    figs = {Path(k).name: v["data_uri"] for k, v in _results(text).items()
            if k.endswith(".png")}
    page = tmp_path / "figures.html"
    page.write_text("<html><body>" + "".join(f'<img id="{n}" src="{u}">' for n, u in figs.items())
                    + "<pre id=out></pre><script>window.onload = () => {document.getElementById"
                    "('out').textContent = JSON.stringify([...document.images].map(i => "
                    "[i.id, i.naturalWidth]));};</script></body></html>")
    dom = subprocess.run([*run, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    widths = dict(json.loads(re.search(r'<pre id="out">(.*?)</pre>', dom).group(1)))
    assert sorted(widths) == sorted(figs) and all(w > 100 for w in widths.values()), widths
