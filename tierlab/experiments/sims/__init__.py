"""External memory simulators (Ramulator 2, gem5, VANS) and the embedded
timing model, driven from one memory spec and one memory-side stream: one
generator and stats parser per back-end (ramulator2, gem5, vans), the runner
(run), the stream reader (stream). docs/simulators.md."""
