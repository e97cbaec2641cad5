"""config/tiny.yaml through profiles/slurm on a real Slurm: a one-node
cluster started on this machine (slurm_cluster.py), the workflow's jobs
submitted with sbatch by snakemake-executor-plugin-slurm, their status read
with squeue (no slurmdbd)."""
from __future__ import annotations

import re
import time

import pytest
import yaml

import slurm_cluster
from workflow_run import WF, snakemake
from tierlab.traces.schema import read_table


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    gone = slurm_cluster.missing()
    if gone:
        pytest.skip(f"Slurm is not installed here ({', '.join(gone)} missing; Debian slurm-wlm and "
                    f"munge, installed by `make test-deps`)")
    c = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    yield c
    c.stop()
    assert all(p.poll() is not None for p in c.procs.values())


def test_tiny_config_runs_through_slurm(cluster, default_costs, tmp_path):
    # tiny.yaml less its memory-tier jobs (the local run covers those): the
    # cluster's part is the submission, not each rule again
    cfg = yaml.safe_load((WF / "config" / "tiny.yaml").read_text())
    cfg["memory_tiers"] = {"backend": "none"}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    t0 = time.monotonic()
    r = snakemake(tmp_path, "--profile", WF / "profiles" / "slurm",
                  "--configfile", tmp_path / "tiny.yaml", env=cluster.env, timeout=420)
    took = time.monotonic() - t0
    out = (tmp_path / "snakemake.out").read_text()
    assert r.returncode == 0, out[-6000:] + cluster.log("slurmctld")[-2000:]
    res = tmp_path / "results" / "tiny"
    assert read_table(res / "validate" / "validation.csv")[0] == "validation"
    assert (res / "figures" / "cache-curves.png").stat().st_size > 5000
    # every job went through Slurm: its id in the log, COMPLETED in squeue
    jobs = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/(\w+)/", out))
    ids = set(jobs)
    known = cluster.squeue_all()
    assert ids <= set(known), (ids, known)
    assert all(known[i][1] == "COMPLETED" for i in ids), known
    kinds = set(jobs.values())  # rule_NAME, or group_NAME_RULES for a group job
    for kind in ("rule_corpus", "rule_validation", "group_apcache_apcache", "group_model_model"):
        assert kind in kinds, sorted(kinds)
    print(f"Slurm workflow: {len(ids)} sbatch jobs in {took:.0f} s: {sorted(kinds)}")
