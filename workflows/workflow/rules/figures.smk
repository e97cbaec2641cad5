# The figures of the report, each from result tables only (analysis/).

FIG = f"{R}/figures"
FIGURES = [f"{FIG}/qps-vs-index-size.png", f"{FIG}/cache-curves.png", f"{FIG}/miss-rate.png",
           f"{FIG}/lookahead-timeline.png", f"{FIG}/dram-saved.png",
           f"{R}/validate/validation-targets.csv", f"{R}/validate/parity.png",
           f"{FIG}/codec-pareto.png"]
CELL_RUNS = [f"{R}/validate/measured.parquet", f"{R}/validate/model.parquet"]


rule figure_qps_vs_index_size:
    input:
        runs=expand(f"{R}/query/{{codec}}/{{wl}}/run.parquet", codec=CODECS, wl=WORKLOADS),
        queries=expand(f"{R}/query/{{codec}}/{{wl}}/query.parquet", codec=CODECS, wl=WORKLOADS),
        index=expand(f"{R}/index/{{codec}}", codec=CODECS),
        corpus=f"{R}/corpus/corpus.txt",
    output:
        report(f"{FIG}/qps-vs-index-size.png", caption="../report/qps-vs-index-size.rst",
               category="1. Codecs"),
    params:
        codecs=CODECS,
        workloads=list(WORKLOADS.values()),
    log:
        f"{R}/logs/figures/qps-vs-index-size.log",
    benchmark:
        f"{R}/benchmarks/figures/qps-vs-index-size.tsv"
    group:
        "figures"
    resources:
        mem_mb=1024,
        runtime=5,
    script:
        "../scripts/figure_index.py"


rule figure_cells:
    input:
        runs=CELL_RUNS,
        timelines=expand(f"{R}/validate/rows/{{row}}/{{side}}/cache_run.parquet", row=ROWS,
                         side=["measured", "model"]),
    output:
        curves=report(f"{FIG}/cache-curves.png", caption="../report/cache-curves.rst",
                      category="2. APCache", subcategory="QPS and p99"),
        miss=report(f"{FIG}/miss-rate.png", caption="../report/miss-rate.rst",
                    category="2. APCache", subcategory="Miss rate"),
        lookahead=report(f"{FIG}/lookahead-timeline.png", caption="../report/lookahead.rst",
                         category="2. APCache", subcategory="Lookahead"),
        dram=report(f"{FIG}/dram-saved.png", caption="../report/dram-saved.rst",
                    category="3. DRAM"),
    params:
        rp=float(GRID.rows[0].workload["rp"]),
    log:
        f"{R}/logs/figures/cells.log",
    benchmark:
        f"{R}/benchmarks/figures/cells.tsv"
    group:
        "figures"
    resources:
        mem_mb=2048,
        runtime=5,
    script:
        "../scripts/figure_cells.py"


rule figure_error_table:
    input:
        f"{R}/validate/summary.json",
    output:
        report(f"{R}/validate/validation-targets.csv", caption="../report/error-table.rst",
               category="4. Validation"),
    log:
        f"{R}/logs/figures/error-table.log",
    benchmark:
        f"{R}/benchmarks/figures/error-table.tsv"
    group:
        "figures"
    resources:
        mem_mb=512,
        runtime=5,
    script:
        "../scripts/figure_error_table.py"
