"""Helpers shared by the index and query tests: small random corpora with
the awkward cases of the corpus format, and the codec registry."""
from __future__ import annotations

import random
from pathlib import Path



def random_corpus(seed: int = 0, docs: int = 2000, vocab: int = 400, doc_bytes: int = 1024,
                  trailing_newline: bool = True) -> bytes:
    """Zipf-ish words (t0 is the most frequent) with mixed case, odd
    separators (punctuation, tabs, CR, UTF-8 bytes), empty lines, a few lines
    longer than doc_bytes, `every` in every document and `rare` in a cluster."""
    rng = random.Random(seed)
    seps = [" ", " ", " ", ", ", "\t", " - ", "\u00e9", "\r", "  ", ".", "\u4e2d"]
    lines = []
    for d in range(docs):
        if rng.random() < 0.02:
            lines.append("")
            continue
        n = rng.randint(1, 40)
        if rng.random() < 0.01:
            n = doc_bytes // 2  # far longer than doc_bytes: cut
        words = []
        for _ in range(n):
            i = int(vocab ** rng.random()) - 1
            w = f"t{i}"
            if rng.random() < 0.05:
                w = w.upper()
            words.append(w)
        words.insert(rng.randint(0, len(words)), "every")
        if docs // 2 <= d < docs // 2 + 5:
            words.append("rare")
        text = words[0]
        for w in words[1:]:
            text += rng.choice(seps) + w
        lines.append(text)
    data = "\n".join(lines).encode()
    return data + b"\n" if trailing_newline else data


def codec_names() -> list[str]:
    from tierlab.core import native

    return [c.name for c in native.codecs()]


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
