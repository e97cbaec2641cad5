"""Running the workflow (workflows/) in a temporary folder: its Snakefile,
configs and profiles from the repository, its results/ and .snakemake/ in
the folder."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

WF = Path(__file__).resolve().parents[2] / "workflows"


def snakemake(workdir: Path, *args, env=None, timeout=600) -> subprocess.CompletedProcess:
    """`snakemake` of this Python on the workflow, run in workdir; its output
    (stdout and stderr) in workdir/snakemake.out, returned as stdout."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(WF / "workflow" / "Snakefile"),
           "--directory", str(workdir), *map(str, args)]
    t0 = time.monotonic()
    out = workdir / "snakemake.out"
    with out.open("a") as f:  # streamed: a run that times out leaves its log
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            r = subprocess.run(cmd, cwd=workdir, env=env, stdout=f, stderr=subprocess.STDOUT,
                               text=True, timeout=timeout)
        finally:
            f.write(f"\n({time.monotonic() - t0:.1f} s)\n")
    text = out.read_text()
    return subprocess.CompletedProcess(cmd, r.returncode, text, "")
