# HOOK (empty by default): address traces of the query runs and their timing
# on the memory tiers of the config, through the backend config.memory_tiers
# .backend chooses: embedded (tierlab's own timing) or ramulator2 / gem5 /
# vans when their binaries are set (`tierlab list backends`).
#
# The commands land with the memory-tier issue: `tierlab trace memory` (an
# address trace of a query run), `tierlab query costs --tier` (the per-block
# cost table on a tier) and `tierlab sim run` (a trace through a backend).
# To wire them at merge: write the rules below this comment (one job per
# codec x workload x tier, outputs result tables of traces/schema.yaml under
# {R}/memory/, `benchmark:` on each), return their outputs from
# memory_tier_outputs() and add a figure (QPS per tier placement) to
# figures.smk. With backend none the workflow runs no job of this file.


def memory_tier_outputs() -> list:
    backend = config.get("memory_tiers", {}).get("backend", "none")
    if backend == "none":
        return []
    raise WorkflowError(
        f"config: memory_tiers.backend: {backend}: the memory-tier rules are not wired into "
        "this workflow yet (workflow/rules/memory_tiers.smk); set it to none")
