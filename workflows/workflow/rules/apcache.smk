# The native APCache runtime, one job per cell of the grid: the cell's runs
# (min_runs at least, CPU traces beside them) into validate/rows/ROW/measured/
# (tierlab.experiments.validate.measure_row, what `tierlab validate` runs).
# threads 2: a query thread and its prefetch worker; on a 2-core machine the
# timed runs thus get the CPUs to themselves. On a cluster a group job runs
# several cells in turn (profiles/slurm group-components).


rule apcache:
    input:
        index=f"{R}/index/{CELL_CODEC}",
        workload=row_workload,
    output:
        f"{R}/validate/rows/{{row}}/measured/cache_run.parquet",
    params:
        grid=grid_doc(),
    log:
        f"{R}/logs/apcache/{{row}}.log",
    benchmark:
        f"{R}/benchmarks/apcache/{{row}}.tsv"
    threads: 2
    group:
        "apcache"
    resources:
        mem_mb=2048,
        runtime=30,
    script:
        "../scripts/apcache_row.py"
