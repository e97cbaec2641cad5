# The time and memory each stage's jobs took (their `benchmark:` files),
# summed per stage: the last table of the report (`snakemake --report`).


rule stage_times:
    input:
        FIGURES + [f"{R}/bench/codecs.json", f"{R}/validate/validation.csv"]
        + expand(f"{R}/query/{{codec}}/{{wl}}/run.parquet", codec=CODECS, wl=WORKLOADS)
        + memory_tier_outputs(),
    output:
        report(f"{R}/stage_times.csv", caption="../report/stage-times.rst", category="5. Run"),
    params:
        benchmarks=f"{R}/benchmarks",
    log:
        f"{R}/logs/stage_times.log",
    benchmark:
        f"{R}/benchmarks/stage_times.tsv"
    resources:
        mem_mb=512,
        runtime=5,
    script:
        "../scripts/stage_times.py"
