"""Independent pure-Python decoders of the codecs' block formats, written from
the format documents alone (kernels/formats/pfor.md, vbyte.md; `base` is
plain u32, index.md), sharing no code with the C kernels. The tests hold the
native codecs to them (tests/kernels/test_format_examples.py) and the
reference index reader (tests/index/reference.py) decodes with them, so a
format document that no longer says what the kernels do fails a test.

decode(codec, data, n, prev) -> (values, bytes used); a block that is not
valid by the document raises Corrupt. Deliberately plain and slow: big ints
as bit streams, one value at a time.
"""
from __future__ import annotations

MASK32 = (1 << 32) - 1


class Corrupt(ValueError):
    """Not a valid block of n values by the format document."""


# ---- VByte (vbyte.md "VByte") -------------------------------------------------

def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """One VByte integer at data[pos]: 7 bits a byte, least significant group
    first, 0x80 set on every byte but the last; at most 5 bytes, the fifth at
    most 0x0F (non-shortest forms are accepted). Returns (value, next pos)."""
    x = 0
    for k in range(5):
        if pos + k >= len(data):
            raise Corrupt(f"varint at byte {pos} runs past the block")
        b = data[pos + k]
        if k == 4 and b > 0x0F:
            raise Corrupt(f"varint at byte {pos}: a fifth byte {b:#04x} above 0x0F")
        x |= (b & 0x7F) << (7 * k)
        if b < 0x80:
            return x, pos + k + 1
    raise Corrupt(f"varint at byte {pos}: more than 5 bytes")  # 5th byte <= 0x0F ends it


def vbyte(data: bytes, n: int) -> tuple[list[int], int]:
    out, pos = [], 0
    for _ in range(n):
        x, pos = read_varint(data, pos)
        out.append(x)
    return out, pos


# ---- StreamVByte (vbyte.md "StreamVByte") ----------------------------------------

def svbyte(data: bytes, n: int) -> tuple[list[int], int]:
    nctrl = (n + 3) // 4
    if len(data) < nctrl:
        raise Corrupt("shorter than its control bytes")
    codes = [(data[i // 4] >> (2 * (i % 4))) & 3 for i in range(n)]
    if n % 4 and data[nctrl - 1] >> (2 * (n % 4)):
        raise Corrupt("unused code pairs of the last control byte are not 0")
    pos, out = nctrl, []
    for c in codes:
        ln = c + 1
        if pos + ln > len(data):
            raise Corrupt("data bytes run past the block")
        out.append(int.from_bytes(data[pos:pos + ln], "little"))
        pos += ln
    return out, pos


# ---- PFor (pfor.md) ----------------------------------------------------------------

PACK, BITMAP, VBYTE, CONST = range(4)


def _section(data: bytes, pos: int, nbytes: int, what: str) -> bytes:
    if pos + nbytes > len(data):
        raise Corrupt(f"{what} runs past the block")
    return data[pos:pos + nbytes]


def unpack_horizontal(low: bytes, n: int, b: int) -> list[int]:
    """Value i in bits [i*b, (i+1)*b) of one little-endian bit stream."""
    bits, mask = int.from_bytes(low, "little"), (1 << b) - 1
    return [(bits >> (i * b)) & mask for i in range(n)]


def unpack_vertical(low: bytes, n: int, b: int) -> list[int]:
    """Eight lanes, value i in lane i % 8 at position i // 8; each lane's bit
    stream cut into 32-bit words; row r holds word r of the eight lanes (lane
    j at bytes 32r + 4j), a last half row (n = 128, odd b) as eight 16-bit
    words (lane j at bytes 32r + 2j)."""
    per_lane = n // 8
    lane_bits = per_lane * b
    full, half = divmod(lane_bits, 32)
    lanes = [0] * 8
    for j in range(8):
        for r in range(full):
            lanes[j] |= int.from_bytes(low[32 * r + 4 * j:32 * r + 4 * j + 4], "little") << (32 * r)
        if half:
            assert half == 16, "only n = 128 with odd b leaves a half row"
            lanes[j] |= int.from_bytes(low[32 * full + 2 * j:32 * full + 2 * j + 2],
                                       "little") << (32 * full)
    mask = (1 << b) - 1
    return [(lanes[i % 8] >> ((i // 8) * b)) & mask for i in range(n)]


def pfor(data: bytes, n: int, vertical: bool) -> tuple[list[int], int]:
    """One PFor block of n stored values (not yet delta-decoded, the ones of
    "Minus one" not yet added: `decode` does both). `vertical`: the 256
    flavours, whose `low` is vertical when n is 128 or 256."""
    if not data:
        raise Corrupt("no header byte")
    kind, b = data[0] >> 6, data[0] & 0x3F
    if b > 32:
        raise Corrupt(f"width {b} > 32")
    pos = 1
    if kind == CONST:
        if b != 0:
            raise Corrupt("CONST with b != 0")
        x, pos = read_varint(data, pos)
        return [x] * n, pos
    exc: list[tuple[int, int]] = []  # (position, high part)
    if kind in (BITMAP, VBYTE) and b >= 32:
        raise Corrupt("an exception block needs b < 32")
    if kind == BITMAP:
        bx = _section(data, pos, 1, "bx")[0]
        pos += 1
        if not 1 <= bx <= 32 - b:
            raise Corrupt(f"bx {bx} outside 1..{32 - b}")
        bitmap = int.from_bytes(_section(data, pos, (n + 7) // 8, "bitmap"), "little")
        pos += (n + 7) // 8
        if bitmap >> n:
            raise Corrupt("bitmap bits past n")
        where = [i for i in range(n) if bitmap >> i & 1]
        if not where:
            raise Corrupt("a BITMAP block without exceptions")
        nb = (len(where) * bx + 7) // 8
        highs = unpack_horizontal(_section(data, pos, nb, "high"), len(where), bx)
        pos += nb
        exc = list(zip(where, highs))
    elif kind == VBYTE:
        nexc = _section(data, pos, 1, "nexc")[0]
        pos += 1
        if nexc < 1:
            raise Corrupt("a VBYTE block without exceptions")
        where = list(_section(data, pos, nexc, "positions"))
        pos += nexc
        if any(p >= n for p in where) or any(a >= c for a, c in zip(where, where[1:])):
            raise Corrupt("positions not ascending below n")
        for p in where:
            h, pos = read_varint(data, pos)
            if h >> (32 - b):
                raise Corrupt(f"high part {h} does not fit above {b} bits")
            exc.append((p, h))
    nlow = (n * b + 7) // 8
    low = _section(data, pos, nlow, "low")
    pos += nlow
    vals = (unpack_vertical if vertical and n in (128, 256) else unpack_horizontal)(low, n, b)
    for p, h in exc:
        vals[p] |= h << b
    return vals, pos


# ---- the codecs ---------------------------------------------------------------------

def _base(data: bytes, n: int) -> tuple[list[int], int]:
    if len(data) < 4 * n:
        raise Corrupt("shorter than 4n bytes")
    return [int.from_bytes(data[4 * i:4 * i + 4], "little") for i in range(n)], 4 * n


# name -> (family decoder, delta?): registry entries and their freq codecs
CODECS = {
    "base": (_base, False),
    "vbyte": (vbyte, False),
    "vbyte-delta": (vbyte, True),
    "svbyte": (svbyte, False),
    "svbyte-delta": (svbyte, True),
    "pfor": (lambda d, n: pfor(d, n, vertical=False), False),
    "pfor-delta": (lambda d, n: pfor(d, n, vertical=False), True),
    "pfor256": (lambda d, n: pfor(d, n, vertical=True), False),
    "pfor-delta256": (lambda d, n: pfor(d, n, vertical=True), True),
}
# pfor.md "Minus one": codecs storing values minus one (a delta block's first gap as is)
MINUS_ONE = {"pfor256", "pfor-delta256"}


# each configuration's freq codec (tierlab_codec_freq; pfor.md's table, vbyte.md)
FREQ = {"base": "base", "vbyte": "vbyte", "vbyte-delta": "vbyte", "svbyte-delta": "svbyte",
        "pfor-delta": "pfor", "pfor-delta256": "pfor256"}


def decode(codec: str, data: bytes, n: int, prev: int = 0) -> tuple[list[int], int]:
    """n values of one block of `codec` (a registry name or a freq codec
    name) and the bytes it used; a delta codec adds the wrapping gaps to
    prev. Raises Corrupt, or KeyError for a codec the documents do not cover."""
    family, delta = CODECS[codec]
    vals, used = family(bytes(data), n)
    if codec in MINUS_ONE:
        vals = [v if delta and i == 0 else (v + 1) & MASK32 for i, v in enumerate(vals)]
    if delta:
        out, acc = [], prev
        for g in vals:
            acc = (acc + g) & MASK32
            out.append(acc)
        vals = out
    return vals, used
