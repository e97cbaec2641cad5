# The corpus: generated (tierlab corpus generate) or a user's files ingested
# (tierlab corpus ingest); one document per line, term table beside it.


rule corpus:
    output:
        f"{R}/corpus/corpus.txt",
    params:
        cmd=corpus_command(),
    log:
        f"{R}/logs/corpus.log",
    benchmark:
        f"{R}/benchmarks/corpus/corpus.tsv"
    resources:
        mem_mb=1024,
        runtime=20,
    shell:
        "{params.cmd} --out {output} --quiet > {log} 2>&1"
