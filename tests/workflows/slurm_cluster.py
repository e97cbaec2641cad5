"""A one-node Slurm cluster on this machine for the workflow tests: munged,
slurmctld and slurmd (Debian's munge and slurm-wlm) started by PID with a
slurm.conf written into a temporary folder, the node on loopback, no
accounting database (slurmdbd), so jobs are seen by squeue only, for
MinJobAge seconds after they end; stopped by the same PIDs."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld",
           "slurmd": "/usr/sbin/slurmd"}
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "srun")
MIN_JOB_AGE_S = 3600  # squeue keeps a finished job this long (the plugin's squeue status)


def missing() -> list[str]:
    """The daemons and client commands not installed here."""
    out = [p for p in DAEMONS.values() if not os.access(p, os.X_OK)]
    return out + [c for c in CLIENTS if shutil.which(c) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mem_mb() -> int:
    with open("/proc/meminfo") as f:
        kb = int(next(line for line in f if line.startswith("MemTotal:")).split()[1])
    return kb // 1024 - 512


@dataclass
class Cluster:
    root: Path
    conf: Path
    env: dict
    pids: dict = field(default_factory=dict)
    procs: dict = field(default_factory=dict)

    def log(self, name: str) -> str:
        p = self.root / f"{name}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def squeue_all(self) -> dict:
        """{job id: (name, state)} of every job squeue still knows, ended ones too."""
        out = subprocess.run(["squeue", "--states=all", "-h", "-o", "%i|%j|%T"], env=self.env,
                             capture_output=True, text=True, timeout=30, check=True).stdout
        rows = (line.split("|") for line in out.splitlines() if line.strip())
        return {i: (n, s) for i, n, s in rows}

    def stop(self) -> None:
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


def start(root: Path) -> Cluster:
    """Write the configuration under root and start the three daemons; wait
    until the node is idle. Raises RuntimeError (with the daemons' logs) if
    it does not come up; the daemons started are stopped then."""
    root.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().split(".")[0]
    munge_sock = root / "munge.socket"
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(stat.S_IRUSR)
    for d in ("state", "spool"):
        (root / d).mkdir(exist_ok=True)
    conf = root / "slurm.conf"
    user = os.environ.get("USER") or __import__("pwd").getpwuid(os.getuid()).pw_name
    conf.write_text(f"""\
ClusterName=tierlab-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_sock}
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'slurmctld.pid'}
SlurmdPidFile={root / 'slurmd.pid'}
SlurmctldLogFile={root / 'slurmctld.log'}
SlurmdLogFile={root / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge={MIN_JOB_AGE_S}
SchedulerParameters=defer_batch=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={_mem_mb()} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    # the plugin's job step drops every SLURM_* variable (SLURM_CONF too) before
    # it calls srun: an srun first on PATH that sets it again
    wrap = root / "bin"
    wrap.mkdir(exist_ok=True)
    srun = wrap / "srun"
    srun.write_text(f"#!/bin/sh\nSLURM_CONF={conf} exec {shutil.which('srun')} \"$@\"\n")
    srun.chmod(0o755)
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": f"{wrap}:{os.environ['PATH']}"}
    c = Cluster(root=root, conf=conf, env=env)
    cmds = {
        "munged": [DAEMONS["munged"], "--foreground", "--force", f"--socket={munge_sock}",
                   f"--key-file={key}", f"--pid-file={root / 'munged.pid'}",
                   f"--log-file={root / 'munged.log'}", f"--seed-file={root / 'munge.seed'}"],
        "slurmctld": [DAEMONS["slurmctld"], "-D", "-i", "-f", str(conf)],
        "slurmd": [DAEMONS["slurmd"], "-D", "-f", str(conf), "-N", host],
    }
    try:
        for name, cmd in cmds.items():
            out = open(root / f"{name}.out", "w")
            c.procs[name] = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            c.pids[name] = c.procs[name].pid
            if name == "munged":
                _wait(lambda: munge_sock.exists(), 20, "munged's socket", c)
        _wait(lambda: _node_idle(env), 60, "the node to be idle", c)
    except BaseException:
        c.stop()
        raise
    return c


def _node_idle(env) -> bool:
    r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True,
                       timeout=20)
    return r.returncode == 0 and r.stdout.strip().startswith("idle")


def _wait(ok, seconds: float, what: str, c: Cluster) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, p in c.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode}:\n"
                                   + (c.root / f"{name}.out").read_text(errors="replace")[-2000:]
                                   + c.log(name)[-2000:])
        if ok():
            return
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what}:\n" + "\n".join(
        f"--- {n}\n{c.log(n)[-1500:]}" for n in ("slurmctld", "slurmd", "munged")))
