"""External memory simulators (Ramulator 2, gem5, VANS) and the embedded
timing model, driven from one memory spec and one memory-side stream: one
generator and stats parser per back-end (ramulator2, gem5, vans), the runner
(run), the stream reader (stream). docs/simulators.md."""

# The back-ends `tierlab sim` knows (the one list: the CLI's choices, the
# runner, the docs' table) and the environment variable naming each binary.
BACKENDS = ("ramulator2", "gem5", "vans", "embedded")
ENV = {"ramulator2": "TIERLAB_RAMULATOR2", "gem5": "TIERLAB_GEM5", "vans": "TIERLAB_VANS"}
GENERATORS = tuple(b for b in BACKENDS if b in ENV)  # the back-ends that write files
MODES = ("unloaded", "saturated")
