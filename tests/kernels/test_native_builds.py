"""The C side of the codec tests, driven from pytest so `make test` is one run:

1. kernels/tests/unit.c in the release build (what `make build` made);
2. the C tests (ctest: unit.c and the others) in an ASan + UBSan build;
3. the libFuzzer harness kernels/fuzz/fuzz_codec.c, a few seconds per codec;
4. the file harnesses kernels/fuzz/fuzz_index.c (open + query a mutated
   index), fuzz_build.c (corpus ingest: build and count_terms against a
   reference) and fuzz_workload.c (the query-file reader), seeded with small
   real inputs made here (and the committed kernels/fuzz/corpus/<harness>/),
   TIERLAB_FUZZ_INPUT_SECONDS (default 12) each (the query reader half).

Builds live under $TIERLAB_BUILD_DIR (default <repo>/build): release/, asan/,
fuzz/ (fuzz/corpus/<name>/ grows between runs and is never committed). Each
build runs once per session and is incremental. A missing tool is a skip that
says what to install, never a silent pass. A fuzzer's finding fails its test
with the contract that broke and the command that reproduces it
(fuzz/artifacts/<name>-crash-...).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import tempfile
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tierlab.core.errors import TierlabError

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TIERLAB_BUILD_DIR", REPO / "build"))
FUZZ_SECONDS = int(os.environ.get("TIERLAB_FUZZ_SECONDS", "4"))
FUZZ_INPUT_SECONDS = int(os.environ.get("TIERLAB_FUZZ_INPUT_SECONDS", "12"))
JOBS = str(max(1, min(os.cpu_count() or 2, 4)))
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1",
                 "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


def _codec_names() -> list[str]:
    """Registry entries and their freq codecs, from the Python binding."""
    from tierlab.core import native

    try:
        names: list[str] = []
        for c in native.codecs():
            for name in (c.name, c.freq.name):
                if name not in names:
                    names.append(name)
        return names
    except TierlabError:
        return []


CODEC_NAMES = _codec_names()


def _tail(text: str, limit: int = 6000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _build(build: Path, *options: str, targets: tuple[str, ...] = ()) -> Path:
    """Configure (first time, or when options change) and build incrementally."""
    cmd = ["cmake", "-S", str(REPO / "kernels"), "-B", str(build), *options]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{_tail(r.stdout + r.stderr)}"
    cmd = ["cmake", "--build", str(build), "-j", JOBS]
    for t in targets:
        cmd += ["--target", t]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{_tail(r.stdout + r.stderr)}"
    return build


def _run(cmd: list[str], env: dict | None = None, timeout: float = 600, cwd: Path | None = None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})


# --- 1. release ------------------------------------------------------------------

@pytest.fixture(scope="session")
def release_build() -> Path:
    """`make build`'s tree; built here (same options) when pytest runs alone."""
    return _build(BUILD / "release", "-DCMAKE_BUILD_TYPE=Release", "-DTIERLAB_WERROR=ON",
                  targets=("tierlab-unit", "tierlab-kernels"))


def test_python_loads_the_build_of_these_sources(release_build):
    """The Python tests load tierlab/_native/ (what `make build` copied), the C
    tests build/release/ from the sources as they are now: after an edit of
    kernels/ without `make build` the two differ and the Python tests would
    pass or fail on the old kernels. The release build is reproducible
    (no paths or dates in it), so a copy of the current build is the same
    bytes."""
    from tierlab.core import native

    if os.environ.get("TIERLAB_NATIVE_DIR"):
        pytest.skip(f"TIERLAB_NATIVE_DIR={os.environ['TIERLAB_NATIVE_DIR']} picks the library")
    loaded = native.native_dir()
    stale = []
    for name, built in (("libtierlab.so", release_build / "libtierlab.so"),
                        ("tierlab.h", REPO / "kernels" / "include" / "tierlab.h"),
                        ("tierlab-kernels", release_build / "tierlab-kernels")):
        have = loaded / name
        if not have.exists() or have.read_bytes() != built.read_bytes():
            stale.append(f"{have} is not {built}")
    assert not stale, ("the Python tests load another build of the kernels than these sources "
                       "give: run `make build`\n" + "\n".join(stale))


def test_unit_release(release_build):
    r = _run([str(release_build / "tierlab-unit")])
    assert r.returncode == 0, f"tierlab-unit failed:\n{_tail(r.stdout)}\n{_tail(r.stderr)}"
    lines = r.stdout.strip().splitlines()
    assert lines[-1].endswith(" 0 failed"), lines[-1]
    for name in CODEC_NAMES:  # every codec was actually tested
        assert any(line.split()[:1] == [name] for line in lines), f"{name} missing:\n{r.stdout}"


# --- 2. sanitizers ----------------------------------------------------------------

@pytest.fixture(scope="session")
def asan_build() -> Path:
    return _build(BUILD / "asan", "-DTIERLAB_SANITIZE=ON", "-DCMAKE_BUILD_TYPE=Debug",
                  "-DTIERLAB_WERROR=ON")


def test_c_tests_under_asan_and_ubsan(asan_build):
    r = _run(["ctest", "--output-on-failure", "-j", JOBS], env=SANITIZER_ENV, timeout=900,
             cwd=asan_build)
    assert r.returncode == 0, f"C tests failed under ASan/UBSan:\n{_tail(r.stdout, 12000)}"
    assert "tests passed" in r.stdout and "unit" in r.stdout, r.stdout


# --- 3. libFuzzer -------------------------------------------------------------------

def _fuzzer_missing() -> str | None:
    """Why the fuzz build cannot run here, or None."""
    if not shutil.which("clang"):
        return "clang is not installed (Debian packages clang and libclang-rt-14-dev; `make deps`)"
    probe = subprocess.run(
        ["clang", "-fsanitize=fuzzer", "-x", "c", "-", "-o", os.devnull],
        input="#include <stddef.h>\n#include <stdint.h>\n"
              "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n",
        capture_output=True, text=True)
    if probe.returncode != 0:
        return ("`clang -fsanitize=fuzzer` cannot link libFuzzer (Debian package "
                f"libclang-rt-14-dev; `make deps`):\n{_tail(probe.stderr, 1000)}")
    return None


@pytest.fixture(scope="session")
def fuzz_build() -> Path:
    reason = _fuzzer_missing()
    if reason:
        pytest.skip(reason)
    # Debug (-O0, assertions on): with ASan + UBSan + coverage, clang needs
    # ~100 s for pfor_delta256_avx2.c alone at -O1/-O2 but 5 s at -O0, and a
    # few seconds of fuzzing per codec gain little from the faster code.
    return _build(BUILD / "fuzz", "-DCMAKE_C_COMPILER=clang", "-DTIERLAB_FUZZ=ON",
                  "-DTIERLAB_ENABLE_TESTS=OFF", "-DCMAKE_BUILD_TYPE=Debug",
                  "-DTIERLAB_WERROR=ON",
                  targets=("tierlab-fuzz-codec", *(f"tierlab-fuzz-{h}" for h in HARNESSES)))


def _finding(r: subprocess.CompletedProcess, binary: Path, env: str = "") -> str:
    """What a failed libFuzzer run found and how to run it again."""
    m = re.search(r"Test unit written to (\S+)", r.stderr)
    unit = m.group(1) if m else "<no test unit written: see the output>"
    broke = re.findall(r"tierlab fuzz: contract broken: .*|SUMMARY: .*", r.stderr)
    return (f"libFuzzer found a failure (exit {r.returncode}): {'; '.join(broke) or '?'}\n"
            f"reproducer: {unit}\nrun it again: {env}{binary} {unit}\n{_tail(r.stderr)}")


def _seed_corpus(name: str, corpus: Path) -> None:
    """A few valid inputs in the harness's layout (see fuzz_codec.c) so the
    fuzzer starts from real blocks instead of learning the format."""
    from tierlab.core import native

    codec = next(c for r in native.codecs() for c in (r, r.freq) if c.name == name)
    rng = np.random.default_rng(7)
    corpus.mkdir(parents=True, exist_ok=True)
    for n, width in ((0, 0), (1, 32), (5, 3), (33, 9), (128, 17), (256, 7), (256, 32)):
        values = (rng.integers(0, 1 << width, n, dtype=np.uint64) if width else
                  np.zeros(n, dtype=np.uint64)).astype(np.uint32)
        if codec.delta:
            values = np.cumsum(values, dtype=np.uint64).astype(np.uint32)
        prev = 0x9E3779B9  # the harness decodes with this prev
        enc = codec.encode(values, prev)
        decode_mode = bytes([0, n & 0xFF, n >> 8]) + enc
        roundtrip_mode = bytes([1, 0x5A]) + values.astype("<u4").tobytes()
        for seed in (decode_mode, roundtrip_mode):
            (corpus / f"seed-{hashlib.sha1(seed).hexdigest()[:16]}").write_bytes(seed)


@pytest.fixture(scope="session")
def fuzz_runs(fuzz_build) -> dict[str, subprocess.CompletedProcess]:
    """One bounded libFuzzer run per codec, as many at a time as there are cores."""
    def run(name: str) -> subprocess.CompletedProcess:
        corpus = fuzz_build / "corpus" / name
        _seed_corpus(name, corpus)
        artifacts = fuzz_build / "artifacts"
        artifacts.mkdir(exist_ok=True)
        return _run([str(fuzz_build / "tierlab-fuzz-codec"), f"-max_total_time={FUZZ_SECONDS}",
                     "-rss_limit_mb=2048", "-timeout=20", "-print_final_stats=1",
                     f"-artifact_prefix={artifacts}/{name}-", str(corpus)],
                    env={**SANITIZER_ENV, "TIERLAB_FUZZ_CODEC": name},
                    timeout=FUZZ_SECONDS + 300)

    with ThreadPoolExecutor(max_workers=int(JOBS)) as pool:
        return dict(zip(CODEC_NAMES, pool.map(run, CODEC_NAMES)))


@pytest.mark.skipif(not CODEC_NAMES, reason="the C kernels are not built: run `make build`")
@pytest.mark.parametrize("name", CODEC_NAMES or ["none"])
def test_fuzz_codec(fuzz_runs, name):
    r = fuzz_runs[name]
    assert r.returncode == 0, _finding(r, BUILD / "fuzz" / "tierlab-fuzz-codec",
                                       f"TIERLAB_FUZZ_CODEC={name} ")
    assert "Done" in r.stderr and "stat::number_of_executed_units" in r.stderr, _tail(r.stderr)


# --- 4. the file harnesses ----------------------------------------------------------

HARNESSES = ("index", "build", "workload")
MAX_LEN = {"build": 4096, "workload": 4096}  # index: its largest seed, and a little more
# the query reader runs thousands of inputs a second, a build tens: it needs less time
SECONDS = {"index": FUZZ_INPUT_SECONDS, "build": FUZZ_INPUT_SECONDS,
           "workload": max(1, FUZZ_INPUT_SECONDS // 2)}
INDEX_FILES = ("dict.bin", "skip.bin", "dids.bin", "freqs.bin", "manifest.json")


def _text_corpus(docs: int = 160) -> bytes:
    """Small and varied: Zipf-ish terms, one in every document (two blocks at
    B = 128), mixed case and separators, an empty line, a long word."""
    rng = np.random.default_rng(5)
    lines = []
    for d in range(docs):
        words = [f"t{int(40 ** rng.random()) - 1}" for _ in range(int(rng.integers(1, 9)))]
        words.insert(int(rng.integers(0, len(words) + 1)), "every" if d % 7 else "Every")
        lines.append((", " if d % 5 == 0 else " ").join(words))
    lines[17] = ""
    lines[40] += " averyveryverylongterm"
    return ("\n".join(lines) + "\n").encode()


def _put(corpus: Path, seed: bytes) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    (corpus / f"seed-{hashlib.sha1(seed).hexdigest()[:16]}").write_bytes(seed)


def _seed_inputs(harness: str, corpus: Path, work: Path) -> None:
    """Real inputs in each harness's layout (see the harness's comment)."""
    from tierlab.cli import main
    from tierlab.core import native
    from tierlab.engine.index import build

    text = _text_corpus()
    (work / "c.txt").write_bytes(text)
    codecs = native.codecs()
    if harness == "index":  # a whole index directory per codec and block size
        for i, c in enumerate(codecs):
            for block in (128, 256):
                d = work / f"{c.name}-{block}"
                build(work / "c.txt", d, codec=c.name, block_size=block, overwrite=True)
                files = [(d / f).read_bytes() for f in INDEX_FILES]
                # headers fixed up (bit 1, and bit 2: totals copied), storage or
                # dram (bit 0), k 1, 3, 10 or 1024 (bits 3-4)
                flags = 0x06 | (block == 128) | (i % 4) << 3
                _put(corpus, bytes([flags]) + struct.pack("<4I", *map(len, files[:4]))
                     + b"".join(files))
    elif harness == "build":  # codec, block size / budget / doc_bytes, the corpus
        odd = [b"", b"\n", b"a b\nc", b"Apple\r\npear APPLE\r\n", "caf\u00e9 na\u00efve x\u00e9y\n".encode(),
               b"x" * 70 + b"\n" + b"y" * 71, b"a\n\n\nb b b\n", b"0 00 000 a0 0a\n"]
        for i, c in enumerate(codecs):
            _put(corpus, bytes([i, 0xFC | i % 2]) + text[:3000])  # doc_bytes 1024
            _put(corpus, bytes([i, 0x0A << 2 | 2 | i % 2]) + text[:3000])  # 31, smallest budget
            _put(corpus, bytes([i, (23 + i) << 2]) + odd[i % len(odd)])
            _put(corpus, bytes([i, 0xFD]) + odd[(i + 3) % len(odd)])
    else:  # real query files, generated from a corpus
        assert main(["corpus", "generate", "--docs", "3000", "--doc-bytes", "200", "--quiet",
                     "--out", str(work / "g.txt")]) == 0
        for cls, qtype in (("H", "single"), ("M", "and"), ("L", "and")):
            w = work / f"{cls}-{qtype}.queries"
            assert main(["workload", "generate", "--corpus", str(work / "g.txt"), "--class", cls,
                         "--type", qtype, "--queries", "25", "--out", str(w), "--quiet"]) == 0
            _put(corpus, w.read_bytes())


@pytest.fixture(scope="session")
def fuzz_input_runs(fuzz_build, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """One bounded libFuzzer run per file harness, two at a time. The files an
    input becomes go to a scratch folder (on /dev/shm when there is one: a
    build per input costs an fsync per file elsewhere) removed afterwards,
    also after a crash."""
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    scratch = Path(tempfile.mkdtemp(prefix="tierlab-fuzz-", dir=shm))

    def run(harness: str) -> subprocess.CompletedProcess:
        corpus = fuzz_build / "corpus" / harness
        work = tmp_path_factory.mktemp(f"seeds-{harness}")
        _seed_inputs(harness, corpus, work)
        artifacts = fuzz_build / "artifacts"
        artifacts.mkdir(exist_ok=True)
        committed = REPO / "kernels" / "fuzz" / "corpus" / harness
        max_len = MAX_LEN.get(harness) or 1024 + max(f.stat().st_size for f in corpus.iterdir())
        tmp = scratch / harness
        tmp.mkdir()
        return _run([str(fuzz_build / f"tierlab-fuzz-{harness}"),
                     f"-max_total_time={SECONDS[harness]}", f"-max_len={max_len}",
                     "-rss_limit_mb=2048", "-timeout=20", "-print_final_stats=1",
                     f"-artifact_prefix={artifacts}/{harness}-", str(corpus),
                     *([str(committed)] if committed.is_dir() else [])],
                    env={**SANITIZER_ENV, "TIERLAB_FUZZ_TMP": str(tmp)},
                    timeout=SECONDS[harness] + 300)

    try:
        with ThreadPoolExecutor(max_workers=int(JOBS)) as pool:
            return dict(zip(HARNESSES, pool.map(run, HARNESSES)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.skipif(not CODEC_NAMES, reason="the C kernels are not built: run `make build`")
@pytest.mark.parametrize("harness", HARNESSES)
def test_fuzz_file_harness(fuzz_input_runs, harness):
    r = fuzz_input_runs[harness]
    assert r.returncode == 0, _finding(r, BUILD / "fuzz" / f"tierlab-fuzz-{harness}")
    assert "Done" in r.stderr and "stat::number_of_executed_units" in r.stderr, _tail(r.stderr)
    # the seeds were read and run (how many inputs follow is the machine's speed, not a contract)
    assert "INITED" in r.stderr and "seed corpus: files: 0 " not in r.stderr, _tail(r.stderr)
