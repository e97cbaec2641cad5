# The memory-tier half (docs/tiers.md, docs/simulators.md), on when
# config.memory_tiers.backend is not none: each codec x workload's query run
# is traced (`tierlab trace memory`, every Nth query), its accesses go through
# the machine's caches into a memory-side stream (`tierlab sim stream`), the
# stream is timed on each memory tier by the backend (`tierlab sim run`:
# embedded, the in-tree timing model, or ramulator2 / gem5 / vans with their
# binary), and the model predicts the QPS of each structure on each tier from
# the same trace (`tierlab model tiers`: the placements figure).

import os

MT = config.get("memory_tiers", {})
MT_BACKEND = MT.get("backend", "none")
MT_TIERS = list(MT.get("tiers", ["ddr4-2666", "cxl-type3", "optane-dcpmm-g1"]))
MT_MACHINE = MT.get("machine", "xeon-gold-6252n")
MT_EVERY = int(MT.get("every", 1))
MT_MODE = MT.get("mode", "unloaded")


def _backend_binary() -> str:
    """The --binary flag of `sim run` (empty: the embedded model, or the
    backend's TIERLAB_* environment variable); a missing binary stops the
    workflow before any job runs."""
    from tierlab.experiments.sims import BACKENDS, ENV

    if MT_BACKEND not in BACKENDS:
        raise WorkflowError(f"config: memory_tiers.backend: {MT_BACKEND}: one of none, "
                            + ", ".join(BACKENDS))
    if MT_BACKEND == "embedded":
        return ""
    binary = MT.get("binary") or os.environ.get(ENV[MT_BACKEND])
    if not binary:
        raise WorkflowError(f"config: memory_tiers.backend: {MT_BACKEND} needs its binary: set "
                            f"memory_tiers.binary or {ENV[MT_BACKEND]}")
    return f"--binary {shlex.quote(str(binary))}"


MT_BINARY = "" if MT_BACKEND == "none" else _backend_binary()
MT_DIR = f"{R}/memory"


def memory_tier_outputs() -> list:
    if MT_BACKEND == "none":
        return []
    return (expand(f"{MT_DIR}/sim/{{tier}}/{{codec}}/{{wl}}/sim_run.csv", tier=MT_TIERS,
                   codec=CODECS, wl=WORKLOADS)
            + expand(f"{MT_DIR}/tiers/{{codec}}/{{wl}}/placements.png", codec=CODECS,
                     wl=WORKLOADS))


rule trace_memory:
    input:
        index=f"{R}/index/{{codec}}",
        workload=f"{R}/workloads/{{wl}}.queries",
    output:
        trace=f"{MT_DIR}/trace/{{codec}}/{{wl}}/memtrace.bin",
        summary=f"{MT_DIR}/trace/{{codec}}/{{wl}}/memtrace_summary.parquet",
    log:
        f"{R}/logs/memory/trace/{{codec}}/{{wl}}.log",
    benchmark:
        f"{R}/benchmarks/memory/trace/{{codec}}/{{wl}}.tsv"
    resources:
        mem_mb=2048,
        runtime=30,
    shell:
        f"{TL} trace memory {{input.index}} {{input.workload}} --place dram"
        f" --every {MT_EVERY} --out $(dirname {{output.trace}}) --quiet > {{log}} 2>&1"


rule memory_stream:
    input:
        trace=f"{MT_DIR}/trace/{{codec}}/{{wl}}/memtrace.bin",
    output:
        f"{MT_DIR}/stream/{{codec}}/{{wl}}.memreq",
    log:
        f"{R}/logs/memory/stream/{{codec}}/{{wl}}.log",
    benchmark:
        f"{R}/benchmarks/memory/stream/{{codec}}/{{wl}}.tsv"
    group:
        "memory"
    resources:
        mem_mb=2048,
        runtime=10,
    shell:
        f"{TL} sim stream --from-trace {{input.trace}} --machine {MT_MACHINE}"
        " --out {output} > {log} 2>&1"


rule sim_run:
    input:
        f"{MT_DIR}/stream/{{codec}}/{{wl}}.memreq",
    output:
        f"{MT_DIR}/sim/{{tier}}/{{codec}}/{{wl}}/sim_run.csv",
    log:
        f"{R}/logs/memory/sim/{{tier}}/{{codec}}/{{wl}}.log",
    benchmark:
        f"{R}/benchmarks/memory/sim/{{tier}}/{{codec}}/{{wl}}.tsv"
    group:
        "memory"
    resources:
        mem_mb=2048,
        runtime=60,
    shell:
        f"{TL} sim run --backend {MT_BACKEND} {MT_BINARY} --mode {MT_MODE} {{wildcards.tier}}"
        " {input} --out $(dirname {output}) > {log} 2>&1"


rule memory_placements:
    input:
        index=f"{R}/index/{{codec}}",
        workload=f"{R}/workloads/{{wl}}.queries",
        trace=f"{MT_DIR}/trace/{{codec}}/{{wl}}/memtrace.bin",
    output:
        table=f"{MT_DIR}/tiers/{{codec}}/{{wl}}/tiers.csv",
        figure=report(f"{MT_DIR}/tiers/{{codec}}/{{wl}}/placements.png",
                      caption="../report/placements.rst", category="6. Memory tiers",
                      subcategory="{codec} {wl}"),
    params:
        tiers=" ".join(f"--tier {t}" for t in MT_TIERS),
    log:
        f"{R}/logs/memory/tiers/{{codec}}/{{wl}}.log",
    benchmark:
        f"{R}/benchmarks/memory/tiers/{{codec}}/{{wl}}.tsv"
    resources:
        mem_mb=2048,
        runtime=30,
    shell:
        f"{TL} model tiers {{input.index}} --workload {{input.workload}} --trace {{input.trace}}"
        f" {{params.tiers}} --machine {MT_MACHINE} --out $(dirname {{output.table}})"
        " > {log} 2>&1"
