# The corpus: generated (tierlab corpus generate) or a user's files ingested
# (tierlab corpus ingest); one document per line, term table beside it.


rule corpus:
    output:
        f"{R}/corpus/corpus.txt",
    params:
        cmd=lambda wc: (
            TL + " corpus generate --size {size} --seed {seed}".format(
                size=config["corpus"]["generate"].get("size", "12MB"),
                seed=config["corpus"]["generate"].get("seed", 0))
            if "generate" in config["corpus"]
            else TL + " corpus ingest --format {fmt} {files}".format(
                fmt=config["corpus"]["ingest"].get("format", "auto"),
                files=" ".join(map(str, config["corpus"]["ingest"]["files"])))
        ),
    log:
        f"{R}/logs/corpus.log",
    benchmark:
        f"{R}/benchmarks/corpus/corpus.tsv"
    resources:
        mem_mb=1024,
        runtime=20,
    shell:
        "{params.cmd} --out {output} --quiet > {log} 2>&1"
