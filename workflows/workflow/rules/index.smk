# One index per codec of the config (tierlab index build).


rule index:
    input:
        f"{R}/corpus/corpus.txt",
    output:
        directory(f"{R}/index/{{codec}}"),
    log:
        f"{R}/logs/index/{{codec}}.log",
    benchmark:
        f"{R}/benchmarks/index/{{codec}}.tsv"
    resources:
        mem_mb=2048,
        runtime=30,
    shell:
        f"{TL} index build {{input}} --codec {{wildcards.codec}} --out {{output}} --force --quiet"
        " > {log} 2>&1"
