"""`tierlab bench codecs`: the codec benchmark (placeholder until written)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks against real peers, written as JSON")
    p.set_defaults(func=lambda a: 0)
