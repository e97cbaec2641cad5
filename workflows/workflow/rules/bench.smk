# The codec benchmark (tierlab bench codecs): each codec against the peer
# libraries, its JSON and the Pareto figure of the report.


rule bench_codecs:
    output:
        json=f"{R}/bench/codecs.json",
        plot=report(f"{R}/figures/codec-pareto.png", caption="../report/codec-pareto.rst",
                    category="1. Codecs"),
    params:
        opts=lambda wc: " ".join(
            [f"--n {config['bench']['codecs']['n']}"] * ("n" in config["bench"].get("codecs", {}))
            + [f"--reps {config['bench']['codecs']['reps']}"]
            * ("reps" in config["bench"].get("codecs", {}))
            + ["--no-peers"] * bool(config["bench"].get("codecs", {}).get("no_peers"))),
    log:
        f"{R}/logs/bench-codecs.log",
    benchmark:
        f"{R}/benchmarks/bench/codecs.tsv"
    threads: 2
    resources:
        mem_mb=2048,
        runtime=30,
    shell:
        f"{TL} bench codecs --out {{output.json}} --plot {{output.plot}} --no-progress"
        " {params.opts}"
        " > {log} 2>&1"
