# The model against the runtime over all cells: errors, rankings, the noise
# floor (validate.finish + analysis/validation_report.analyse, as
# `tierlab validate`).


rule validation:
    input:
        expand(f"{R}/validate/rows/{{row}}/{{side}}/cache_run.parquet", row=ROWS,
               side=["measured", "model"]),
    output:
        table=f"{R}/validate/validation.csv",
        measured=f"{R}/validate/measured.parquet",
        model=f"{R}/validate/model.parquet",
        summary=f"{R}/validate/summary.json",
        markdown=f"{R}/validate/validation.md",
        parity=report(f"{R}/validate/parity.png", caption="../report/parity.rst",
                      category="4. Validation"),
    params:
        grid=grid_doc(),
    log:
        f"{R}/logs/validation.log",
    benchmark:
        f"{R}/benchmarks/validation/validation.tsv"
    resources:
        mem_mb=2048,
        runtime=10,
    script:
        "../scripts/validation.py"

