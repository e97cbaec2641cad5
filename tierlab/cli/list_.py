"""`tierlab list codecs`: print a registry (the names users type)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("list", help="print a registry: the names users type",
                       description="Print one of tierlab's registries.")
    p.add_argument("what", choices=["codecs"], help="which registry")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import native

    if args.what == "codecs":
        print(f"{'codec':<16}{'delta':<7}impl")
        for c in native.codecs():
            print(f"{c.name:<16}{'yes' if c.delta else 'no':<7}{c.impl}")
        print(f"cpu simd features: {native.cpu_features() or 'none'}")
    return 0
