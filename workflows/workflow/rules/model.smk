# The SimPy model of the same cells, given what the runtime's run reported
# (tierlab.experiments.validate.model_row). Short jobs: grouped on a cluster.


rule model:
    input:
        index=f"{R}/index/{CELL_CODEC}",
        workload=row_workload,
        costs=f"{R}/validate/costs.json",
        measured=f"{R}/validate/rows/{{row}}/measured/cache_run.parquet",
    output:
        f"{R}/validate/rows/{{row}}/model/cache_run.parquet",
    params:
        grid=grid_doc(),
    log:
        f"{R}/logs/model/{{row}}.log",
    benchmark:
        f"{R}/benchmarks/model/{{row}}.tsv"
    group:
        "model"
    resources:
        mem_mb=2048,
        runtime=20,
    script:
        "../scripts/model_row.py"
