# Query runs: every workload on every codec's index, all in DRAM, the warm
# pass reported (tierlab query run; the run, query and term tables).


rule query:
    input:
        index=f"{R}/index/{{codec}}",
        workload=f"{R}/workloads/{{wl}}.queries",
    output:
        run=f"{R}/query/{{codec}}/{{wl}}/run.parquet",
        queries=f"{R}/query/{{codec}}/{{wl}}/query.parquet",
    log:
        f"{R}/logs/query/{{codec}}/{{wl}}.log",
    benchmark:
        f"{R}/benchmarks/query/{{codec}}/{{wl}}.tsv"
    group:
        "queries"
    resources:
        mem_mb=1024,
        runtime=10,
    shell:
        f"{TL} query run {{input.index}} {{input.workload}} --out {{output.queries}}"
        " --trace $(dirname {output.run}) --place dram --passes 2 --quiet > {log} 2>&1"
