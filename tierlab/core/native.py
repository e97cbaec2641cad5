"""Binding to the C kernels (libtierlab) through cffi in ABI mode.

The cdef is read from the one public header, kernels/include/tierlab.h, so the
binding cannot drift from the C API. `make build` copies the library and the
header into tierlab/_native/; TIERLAB_NATIVE_DIR points elsewhere (e.g. at a
sanitizer build).
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from tierlab.core.errors import TierlabError

_PKG_NATIVE = Path(__file__).resolve().parents[1] / "_native"

ECORRUPT = -1
EINVAL = -2


def native_dir() -> Path:
    return Path(os.environ.get("TIERLAB_NATIVE_DIR", _PKG_NATIVE))


def _cdef_from_header(text: str) -> str:
    """Strip what cffi's parser cannot take: preprocessor lines (except integer
    #defines) and the C++ guard."""
    text = re.sub(r"#ifdef __cplusplus.*?#endif", "", text, flags=re.S)
    keep = []
    for line in text.splitlines():
        if line.startswith("#"):
            if re.match(r"#define\s+TIERLAB_\w+\s+\(?-?\d+\)?", line):
                keep.append(re.sub(r"/\*.*", "", line).replace("(", " ").replace(")", " "))
            continue
        keep.append(line)
    return "\n".join(keep)


@lru_cache(maxsize=None)
def ffi_lib():
    """(ffi, lib) for libtierlab; a clear TierlabError if it is not built."""
    import cffi

    d = native_dir()
    header, so = d / "tierlab.h", d / "libtierlab.so"
    if not so.exists() or not header.exists():
        raise TierlabError(
            f"the C kernels are not built ({so} missing): run `make build` in the repository"
        )
    ffi = cffi.FFI()
    ffi.cdef(_cdef_from_header(header.read_text()))
    try:
        return ffi, ffi.dlopen(str(so))
    except OSError as e:  # e.g. a half-linked library after an interrupted build
        raise TierlabError(f"cannot load {so} ({e}): rebuild with `make build`") from None


@lru_cache(maxsize=None)
def library_digest() -> str:
    """A short digest of the built libtierlab.so: what was measured with one
    build (a cost table) is not reused with another, whose kernels may cost
    differently."""
    import hashlib

    so = native_dir() / "libtierlab.so"
    if not so.exists():
        ffi_lib()  # the clear "not built" error
    return hashlib.blake2b(so.read_bytes(), digest_size=4).hexdigest()


@contextmanager
def progress_callback(update):
    """A tierlab_progress_fn for one C call: it calls update(done, total), and a
    true return asks the C side to stop. An exception raised inside update
    (Ctrl-C lands there) stops the C call and is re-raised when the block ends,
    in place of whatever error the cancelled call led to."""
    ffi, _ = ffi_lib()
    caught: list[BaseException] = []

    def on_error(exc_type, exc, tb):
        caught.append(exc)
        return 1

    def on_progress(ctx, done, total):
        return 1 if update(int(done), int(total)) else 0

    cb = ffi.callback("tierlab_progress_fn", on_progress, error=1, onerror=on_error)
    try:
        yield cb
    finally:
        if caught:
            raise caught[0]


@dataclass(frozen=True)
class Codec:
    """One entry of the C codec registry."""

    name: str
    delta: bool
    _ptr: object

    @property
    def impl(self) -> str:
        ffi, _ = ffi_lib()
        return ffi.string(self._ptr.impl()).decode()

    @property
    def freq(self) -> "Codec":
        """The codec of this configuration's frequency blocks (never delta-coded)."""
        ffi, lib = ffi_lib()
        p = lib.tierlab_codec_freq(self._ptr)
        return Codec(ffi.string(p.name).decode(), bool(p.delta), p)

    def max_encoded_bytes(self, n: int) -> int:
        return int(self._ptr.max_encoded_bytes(n))

    def encode(self, values, prev: int = 0) -> bytes:
        """Encode one block (<= 256 values) and return its bytes."""
        ffi, _ = ffi_lib()
        arr = np.ascontiguousarray(values, dtype=np.uint32)
        out = ffi.new("uint8_t[]", max(1, self.max_encoded_bytes(len(arr))))
        got = self._ptr.encode(ffi.from_buffer("uint32_t[]", arr), len(arr), prev, out)
        if got < 0:
            raise TierlabError(f"{self.name}: cannot encode a block of {len(arr)} values (error {got})")
        return bytes(ffi.buffer(out, got))

    def decode(self, data: bytes, n: int, prev: int = 0) -> tuple[np.ndarray, int]:
        """Decode n values; returns (values, bytes consumed). Raises on corrupt input."""
        ffi, _ = ffi_lib()
        out = np.zeros(max(n, 1), dtype=np.uint32)
        src = ffi.new("uint8_t[]", bytes(data) or b"\0")  # a private copy of exactly len(data)
        got = self._ptr.decode(src, len(data), n, prev, ffi.from_buffer("uint32_t[]", out))
        if got == ECORRUPT:
            raise CorruptBlock(f"{self.name}: corrupt or truncated block ({len(data)} bytes, n={n})")
        if got < 0:
            raise TierlabError(f"{self.name}: invalid decode request (n={n}, error {got})")
        return out[:n], int(got)


class CorruptBlock(TierlabError):
    """The encoded bytes are not a valid block."""


def codecs() -> list[Codec]:
    """The registry, in registry order."""
    ffi, lib = ffi_lib()
    out = []
    for i in range(lib.tierlab_codec_count()):
        p = lib.tierlab_codec_at(i)
        out.append(Codec(ffi.string(p.name).decode(), bool(p.delta), p))
    return out


def codec(name: str) -> Codec:
    for c in codecs():
        if c.name == name:
            return c
    names = ", ".join(c.name for c in codecs())
    raise TierlabError(f"unknown codec '{name}'; known codecs: {names}")


# The C registries (tierlab.h): each a count and a name function over the one
# table that defines its names (codecs hand out descriptors: see below).
_REGISTRIES = {
    "configs": ("tierlab_apcache_config_count", "tierlab_apcache_config_name"),
    "policies": ("tierlab_policy_count", "tierlab_policy_name"),
    "tiers": ("tierlab_tier_count", "tierlab_tier_name"),
    "query_types": ("tierlab_query_type_count", "tierlab_query_type_name"),
    "memory_regions": ("tierlab_memtrace_region_count", "tierlab_memtrace_region_name"),
}


@lru_cache(maxsize=None)
def registry_names(registry: str) -> tuple[str, ...]:
    """The names of one of the C registries (tierlab.core.registry): codecs,
    configs, policies, tiers (placement tiers) or query_types, in registry
    order, read from the C table through its count and name functions."""
    if registry != "codecs" and registry not in _REGISTRIES:
        raise TierlabError(f"unknown registry '{registry}'; known: codecs, "
                           f"{', '.join(_REGISTRIES)}")
    ffi, lib = ffi_lib()
    if registry == "codecs":
        return tuple(c.name for c in codecs())
    count, name = (getattr(lib, f) for f in _REGISTRIES[registry])
    return tuple(ffi.string(name(i)).decode() for i in range(count()))


def cpu_features() -> str:
    ffi, lib = ffi_lib()
    return ffi.string(lib.tierlab_cpu_features()).decode()


def force_scalar(on: bool) -> None:
    _, lib = ffi_lib()
    lib.tierlab_force_scalar(1 if on else 0)


def cstr(text: str, what: str) -> bytes:
    """Text for a C string argument (a name, a term, a placement): UTF-8,
    or a TierlabError naming `what` (a command line that is not UTF-8 comes
    to Python with surrogates). Paths go through os.fsencode instead."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise TierlabError(f"{what} {text!r}: not UTF-8 text") from None


# --- resource guards (tierlab.h "Resource guards") ----------------------------------

def memory_room() -> tuple[int, str]:
    """(bytes, how): the memory this process may still take, MemAvailable or
    its memory cgroup's room (tierlab_memory_room)."""
    ffi, lib = ffi_lib()
    room, how = ffi.new("uint64_t *"), ffi.new("char[]", 4600)
    lib.tierlab_memory_room(room, how, len(how))
    return int(room[0]), ffi.string(how).decode(errors="replace")


def memory_guard(planned: int, what: str, detail: str = "", hint: str = "") -> None:
    """The rule the APCache runtime applies too (tierlab_memory_guard): a
    TierlabError naming the numbers when `planned` bytes exceed
    memory_room()."""
    ffi, lib = ffi_lib()
    err = ffi.new("char[]", 4 * lib.TIERLAB_ERRMSG + len(what) + len(detail) + len(hint))
    rc = lib.tierlab_memory_guard(min(int(planned), 2**64 - 1), what.encode(), detail.encode(),
                                  hint.encode(), err, len(err))
    if rc:
        raise TierlabError(ffi.string(err).decode(errors="replace"))


def cache_bytes(policy: str, nkeys: int) -> int:
    """The bytes a tierlab_cache over nkeys keys takes (tierlab_cache_bytes)."""
    _, lib = ffi_lib()
    return int(lib.tierlab_cache_bytes(lib.tierlab_policy_find(policy.encode()),
                                       min(int(nkeys), 2**64 - 1)))


def bytes_text(b: int) -> str:
    """Bytes with a binary unit, as the C side writes them ("21.9 GiB")."""
    v, units = float(b), ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    u = 0
    while v >= 1024 and u < len(units) - 1:
        v, u = v / 1024, u + 1
    return f"{int(b)} bytes" if u == 0 else f"{v:.1f} {units[u]}"
