# The model's calibration: the per-block CPU cost table of the cells' index
# (grid.costs measure: tierlab query costs INDEX), this machine's cached
# default table (default: tierlab query costs --default, measured once), or
# the cost table file the grid names.


rule costs:
    input:
        f"{R}/index/{CELL_CODEC}",
    output:
        f"{R}/validate/costs.json",
    params:
        given=config["grid"].get("costs", "measure"),
    log:
        f"{R}/logs/costs.log",
    benchmark:
        f"{R}/benchmarks/costs/costs.tsv"
    resources:
        mem_mb=2048,
        runtime=20,
    shell:
        "if [ '{params.given}' = measure ]; then"
        f" {TL} query costs {{input}} --out {{output}} --quiet > {{log}} 2>&1;"
        " elif [ '{params.given}' = default ]; then"
        f" {TL} query costs --default --codec {CELL_CODEC} --out {{output}} --quiet > {{log}} 2>&1;"
        " else cp '{params.given}' {output}; fi"
