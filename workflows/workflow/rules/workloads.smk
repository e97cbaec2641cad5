# One query file per workload of the config, from the corpus's term table
# (tierlab.experiments.validate.workload_file: what `tierlab validate` runs).


rule workload:
    input:
        corpus=f"{R}/corpus/corpus.txt",
        index=f"{R}/index/{CELL_CODEC}",
    output:
        f"{R}/workloads/{{wl}}.queries",
    params:
        grid=grid_doc(),
        workload=lambda wc: WORKLOADS.get(wc.wl) or next(
            r.workload for r in GRID.rows if workload_name(r.workload) == wc.wl),
        generated="generate" in config["corpus"],
    log:
        f"{R}/logs/workloads/{{wl}}.log",
    benchmark:
        f"{R}/benchmarks/workloads/{{wl}}.tsv"
    group:
        "queries"
    resources:
        mem_mb=1024,
        runtime=10,
    script:
        "../scripts/workload.py"
