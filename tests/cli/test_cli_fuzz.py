"""Every `tierlab` command driven with generated arguments (issue 19, part 4:
no traceback for user input).

The commands are found by walking the argparse tree of
tierlab.cli.build_parser(), so a new command is fuzzed without an edit here.
Each example runs one command in process on tiny inputs (an 800-document
corpus, its index, a 20-query workload, a trace) with arguments drawn per
action: numbers valid, huge, negative, zero, NaN or not numbers at all;
paths to the tiny inputs, to folders, to missing files, to files of
generated content (text, binary, non-UTF-8, YAML that is not a mapping, run
specs with unknown keys) and outputs where folders or files already are.
It asserts what a user may rely on: exit status 0 or 2 (1 only where a
command documents it), one line on stderr at most for status 2, never a
Python traceback, never a signal (a crash would take the test process).

Commands that necessarily run long (the benchmarks, `model reference`,
`model sweep`, `validate`, `query costs`) get their argument validation
tested only: their long-running entry point is replaced by a stub that ends
the example once the command reaches it. Every example must finish within
EXAMPLE_BUDGET_S.

Profiles (tests/conftest.py): "ci", derandomized and bounded (300 examples,
about 40 s); "dev" for a longer random hunt:
pytest tests/cli/test_cli_fuzz.py --hypothesis-profile dev.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import signal
import uuid
from pathlib import Path
from unittest import mock

import pytest
import tqdm
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierlab.cli import build_parser, main
from tierlab.core import runspec

EXAMPLE_BUDGET_S = 20
# examples: 300 under the "ci" profile (about 40 s on 2 cores), else the
# loaded profile's (`--hypothesis-profile dev` or HYPOTHESIS_PROFILE=dev: 2000)
_PROFILE = getattr(settings, "_current_profile", None) or "ci"
MAX_EXAMPLES = 300 if _PROFILE == "ci" else settings.get_profile(_PROFILE).max_examples

# --- the commands ------------------------------------------------------------------


def _leaves(parser: argparse.ArgumentParser, path: tuple = ()):
    """(path, parser) of every runnable command of the tree."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, path + (name,))


COMMANDS = dict(_leaves(build_parser()))

# Long-running entry points: replaced by a stub that raises _Reached.
HEAVY = {
    ("bench", "codecs"): ["tierlab.experiments.bench.codecs.run"],
    ("bench", "index"): ["tierlab.experiments.bench.index.run"],
    ("bench", "pisa"): ["tierlab.experiments.bench.pisa.run"],
    ("bench", "model"): ["tierlab.experiments.bench.model.run"],
    ("bench", "cache"): ["tierlab.experiments.bench.cache.run"],
    ("bench", "integrity"): ["tierlab.experiments.bench.integrity.run"],
    ("model", "sweep"): ["tierlab.experiments.sweep.run"],
    ("model", "reference"): ["tierlab.experiments.sweep.run", "tierlab.model.costs.default",
                             "tierlab.experiments.reference.reference_costs"],
    ("validate",): ["tierlab.experiments.validate.run"],
    ("query", "costs"): ["tierlab.model.costs.measure", "tierlab.model.costs.default"],
    ("sim", "run"): ["tierlab.experiments.sims.run._run_binary",
                     "tierlab.experiments.sims.embedded.run"],
    ("sim", "compare"): ["tierlab.experiments.sims.compare.compare"],
    ("bench", "memsim"): ["tierlab.experiments.bench.memsim.run"],
    ("model", "chapter6"): ["tierlab.experiments.tiers.run_chapter6"],
    ("model", "tiers"): ["tierlab.experiments.tiers.structure_grid"],
    # the tracing build, made on first use, takes a minute (tests/traces/ run it)
    ("trace", "memory"): ["tierlab.engine.memtrace.build"],
    ("bench", "memtrace"): ["tierlab.experiments.bench.memtrace.run"],
}
# Commands that document exit status 1 (a result that disagrees, a failed row).
STATUS_1 = {("bench", "pisa"), ("bench", "cache"), ("validate",)}


class _Reached(BaseException):
    """A stubbed long-running entry point was reached: validation passed."""


class _OverBudget(BaseException):
    """The example ran longer than EXAMPLE_BUDGET_S."""


def _stub(*args, **kwargs):
    raise _Reached()


INLINE_COSTS = "{single: {query_ns: 1000, block_ns: 100}, and: {query_ns: 2000, block_ns: 100}}"


# --- the tiny inputs ------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    quiet = contextlib.redirect_stdout(io.StringIO())
    with quiet:
        assert main(["corpus", "generate", "--docs", "800", "--doc-bytes", "256", "--quiet",
                     "--out", str(d / "c.txt")]) == 0
        assert main(["index", "build", str(d / "c.txt"), "--quiet", "--out",
                     str(d / "idx")]) == 0
        assert main(["workload", "generate", "--corpus", str(d / "c.txt"), "--class", "H",
                     "--queries", "20", "--quiet", "--out", str(d / "h.queries")]) == 0
        assert main(["query", "run", str(d / "idx"), str(d / "h.queries"), "--out",
                     str(d / "q.parquet"), "--trace", str(d / "trace"), "--passes", "1",
                     "--quiet"]) == 0
        assert main(["index", "export", str(d / "idx"), "--ciff", str(d / "i.ciff"),
                     "--quiet"]) == 0
        # warm the model's imports: the first model run of a process pays them
        assert main(["model", "run", "--index", str(d / "idx"), "--workload",
                     str(d / "h.queries"), "--costs", INLINE_COSTS, "--out",
                     str(d / "m")]) == 0
    (d / "empty").mkdir()
    (d / "afile").write_text("just text\n")
    (d / "spec.yaml").write_text(yaml.safe_dump({"cores": 1, "k": 10, "cache_bytes": "1MiB"}))
    (d / "grid.yaml").write_text(yaml.safe_dump({
        "index": str(d / "idx"), "workload": str(d / "h.queries"), "costs": INLINE_COSTS,
        "cache_bytes": ["1MiB", "2MiB"], "config": ["base", "hybrid"]}))
    (d / "vgrid.yaml").write_text(yaml.safe_dump({
        "index": str(d / "idx"), "workload": {"type": "single", "class": "H", "queries": 5},
        "config": "base", "cache_fraction": [0.1, 0.5], "device": "nvme-p4800x",
        "cpu": "table"}))
    return d


# --- values ------------------------------------------------------------------------

NUMBERS = ["0", "-1", "1", "2", "3", "17", "1e3", "0.5", "-0", "1.5", "4294967295",
           "4294967296", "18446744073709551615", "18446744073709551616", "-9223372036854775809",
           "1e308", "-1e308", "nan", "inf", "-inf", "", " ", "abc", "0x10", "1_000", "١"]
SIZES = ["4096", "64KiB", "1MiB", "0", "-1", "1e308", "1.5GiB", "1TiB", "999999999999TB", "x",
         "", "nan", "4KB", "18446744073709551616"]
YAML_VALUES = ["null", "~", "true", "[1, 2]", "{a: 1}", "{", "]", ".nan", "-.inf", "'quoted'",
               "!!python/object/apply:os.system ['true']", "&a [*a]", "0o17", "1e400",
               "\u00e9t\u00e9", "a: b: c"]
TEXT = ["", " ", "-", "--", "x", "AND", "nosuchterm", "dram", "storage", "pm:/nonexistent",
        "numa:9", "numa:x", "dict=dram,skip=storage", "dict=,skip=", "pfor-delta256",
        "vbyte", "H", "M", "L", "single", "and", "lru", "belady", "hybrid", "real",
        "nvme-p4800x", "ddr4-2666", "H=3", "X=1", "H=-1", "H=", "=3", "text", "jsonl",
        "\x00", "\udcff", "a\nb", "é", "x" * 300]


def _file_contents():
    """(name suffix, bytes) of a generated input file."""
    spec_keys = runspec.keys()
    mapping = st.dictionaries(
        st.sampled_from(spec_keys + ["nosuchkey", "index ", "Cores"]),
        st.sampled_from(NUMBERS + YAML_VALUES + TEXT[:20]), max_size=4)
    return st.one_of(
        st.tuples(st.just(".yaml"), mapping.map(lambda m: yaml.safe_dump(m).encode())),
        st.tuples(st.sampled_from([".yaml", ".txt", ""]),
                  st.sampled_from([b"", b"- 1\n- 2\n", b"just a string\n", b"42\n", b"{\n",
                                   b"null\n", b": :\n", b"\xff\xfe\x00bin", b"a: [\n",
                                   b"index: reference\ncores: 1000000\n",
                                   b"nelge\nAND\n", b"a b c d e f g h i j k l m n o p q\n",
                                   b"t0\r\nt1\r\n", "\u00e9t\u00e9\n".encode("latin-1")])),
        st.tuples(st.sampled_from([".txt", ".queries", ".jsonl", ".tsv", ".csv", ".parquet",
                                   ".json", ".ciff"]),
                  st.binary(max_size=64)),
    )


class World:
    """The paths one example may name: the tiny inputs, hostile paths, and
    files of generated content in a fresh folder."""

    def __init__(self, data: Path, draw):
        self.data = data
        self.dir = data / "ex" / uuid.uuid4().hex[:8]
        self.dir.mkdir(parents=True)
        self.draw = draw
        self.n = 0

    def new_file(self) -> str:
        suffix, content = self.draw(_file_contents())
        self.n += 1
        p = self.dir / f"f{self.n}{suffix}"
        p.write_bytes(content)
        return str(p)

    def fresh(self, suffix: str = "") -> str:
        self.n += 1
        return str(self.dir / f"out{self.n}{suffix}")

    def path(self, kind: str = "any") -> str:
        d = self.data
        inputs = {"index": [d / "idx"], "corpus": [d / "c.txt"], "workload": [d / "h.queries"],
                  "trace": [d / "trace", d / "q.parquet"], "ciff": [d / "i.ciff"],
                  "spec": [d / "spec.yaml", d / "grid.yaml", d / "vgrid.yaml"]}
        hostile = [d / "empty", d / "afile", d / "missing", d / "afile" / "below", d,
                   Path("/dev/null"), Path("/proc/self/status"), Path(""), d / "idx" / "dids.bin"]
        choice = self.draw(st.integers(0, 9))
        if choice < 6 and kind in inputs:
            return str(self.draw(st.sampled_from(inputs[kind])))
        if choice < 8:
            return self.new_file()
        return str(self.draw(st.sampled_from(hostile + sum(inputs.values(), []))))

    def out(self, suffix: str = "") -> str:
        d = self.data
        choice = self.draw(st.integers(0, 9))
        if choice < 8:
            return self.fresh(self.draw(st.sampled_from([suffix, suffix, "", ".csv", ".json"])))
        return str(self.draw(st.sampled_from([d / "empty", d / "afile", d / "afile" / "x",
                                              Path(""), d / "missing" / "deep" / "x",
                                              Path("/proc/nope")])))


PATH_DESTS = {"index": "index", "corpus": "corpus", "workload": "workload", "path": "trace",
              "ciff": "ciff", "grid": "spec", "spec": "spec", "inputs": "corpus",
              "terms": "any", "costs": "any", "log": "workload"}
OUT_DESTS = {"out", "results", "trace", "work", "plot"}


VALID_NUMBERS = ["1", "2", "3", "5", "0.5", "0.1", "7"]
# Options whose valid values scale a command's running time with nothing to
# guard (no memory or disk grows): a huge valid value is a long run the user
# asked for, not a mistake, so only invalid ones are drawn.
WORK = {("query", "run", "passes")}
WORK_NUMBERS = ["0", "-1", "-0", "1.5", "nan", "inf", "-inf", "", "abc", "0x10"]
# valid-looking values of options taking names
NAMED = {"cls": ["H", "M", "L", "h"], "type": ["single", "and"],
         "codec": ["pfor-delta256", "vbyte", "base", "svbyte-delta"],
         "place": ["dram", "storage", "dict=dram,skip=dram", "dict=dram,skip=storage,did=storage"],
         "placement": ["dram", "storage"], "queries": ["H=3", "M=2", "L=1"],
         "text_field": ["text", "body"], "policy": ["lru", "fifo", "s3-fifo"],
         "pisa_encoding": ["block_simdbp"], "single_algorithm": [], "and_algorithm": []}


def _key_values(key: str) -> list[str]:
    """Valid-looking values of a run spec key: its default and registry names."""
    from tierlab.core import registry

    info = runspec.info(key)
    vals = [yaml.safe_dump(info.get("default"), default_flow_style=True).strip()
            .removesuffix("...").strip()]
    reg = info.get("x-registry")
    if reg:
        vals += list(getattr(registry, reg.replace("-", "_"))())
    if info.get("x-unit") == "bytes":
        vals += ["64KiB", "1MiB", "8KiB"]
    if info.get("type") == "integer" or info.get("x-unit") in ("queries", "ns"):
        vals += ["1", "2", "16"]
    if info.get("type") == "boolean":
        vals += ["true", "false"]
    if key.startswith("place_"):
        vals += ["dram", "storage"]
    if key == "lookahead":
        vals += ["adaptive", "none", "16"]
    if key == "cache_fraction":
        vals += ["0.1", "0.5"]
    return [v for v in vals if v not in ("", "null")] or ["1"]


def _value(w: World, path: tuple, action: argparse.Action) -> str:
    """One generated value for an option or positional: valid-looking three
    times in four, hostile otherwise."""
    draw = w.draw
    dest = action.dest
    hostile = draw(st.integers(0, 3)) == 0
    if action.choices:
        return draw(st.sampled_from(TEXT[:6] if hostile else [str(c) for c in action.choices]))
    if dest.startswith("key_"):
        key = dest[4:]
        if key in ("index", "workload"):
            return w.path(key)
        if key == "costs":
            return w.path() if hostile else INLINE_COSTS
        if key == "out":
            return w.out()
        if not hostile:
            return draw(st.sampled_from(_key_values(key)))
        info = runspec.info(key)
        if info.get("x-unit") == "bytes":
            return draw(st.sampled_from(SIZES + YAML_VALUES))
        if info.get("type") in ("integer", "number") or "oneOf" in info:
            return draw(st.sampled_from(NUMBERS + YAML_VALUES))
        return draw(st.sampled_from(TEXT + YAML_VALUES))
    if dest == "set_pairs":
        key = draw(st.sampled_from(runspec.keys() + (["nosuchkey", "", " "] if hostile else [])))
        if key in ("index", "workload"):
            val = w.path(key)
        elif key == "costs":
            val = INLINE_COSTS
        elif key == "out":
            val = w.out()
        elif hostile:
            val = draw(st.sampled_from(NUMBERS + SIZES + YAML_VALUES + TEXT[:12]))
        else:
            val = draw(st.sampled_from(_key_values(key)))
        return draw(st.sampled_from([f"{key}={val}", f"{key}{val}", f"={val}"])) if hostile \
            else f"{key}={val}"
    if dest in OUT_DESTS or (path == ("query", "costs") and dest == "out"):
        return w.out(".parquet" if path == ("query", "run") else "")
    if dest in PATH_DESTS:
        return w.path(PATH_DESTS[dest])
    if not hostile and NAMED.get(dest):
        return draw(st.sampled_from(NAMED[dest]))
    typ = getattr(action.type, "__name__", None)
    if typ == "size":
        return draw(st.sampled_from(SIZES if hostile else SIZES[:3]))
    if typ in ("int", "float", "positive_int", "_threshold"):
        hostile_numbers = WORK_NUMBERS if path + (dest,) in WORK else NUMBERS
        return draw(st.sampled_from(hostile_numbers if hostile else VALID_NUMBERS))
    return draw(st.sampled_from(TEXT if hostile else TEXT[6:32]))


def _fixed(d: Path, w: World, path: tuple) -> list[str]:
    """Leading arguments that keep a command on the tiny inputs and quick;
    generated options come after them and win (argparse: the last wins)."""
    if path == ("model", "run"):
        return ["--index", str(d / "idx"), "--workload", str(d / "h.queries"), "--costs",
                INLINE_COSTS, "--out", w.fresh()]
    if path == ("apcache", "run"):
        return ["--index", str(d / "idx"), "--workload", str(d / "h.queries"), "--out",
                w.fresh(), "--quiet", "--device", "nvme-p4800x"]
    if path == ("corpus", "generate"):
        return ["--docs", "50", "--doc-bytes", "64", "--quiet", "--out", w.fresh(".txt")]
    if path == ("workload", "generate"):
        return ["--corpus", str(d / "c.txt"), "--class", "H", "--queries", "5", "--quiet",
                "--out", w.fresh()]
    if path == ("query", "run"):
        return ["--passes", "1", "--quiet"]
    if path == ("workload", "stats"):
        return ["--corpus", str(d / "c.txt")]
    if path[0] == "bench":
        return ["--no-progress", "--out", w.fresh(".json")]
    if path in (("model", "sweep"), ("model", "reference"), ("validate",)):
        return ["--no-progress"]
    return []


def _argv(w: World, path: tuple, parser: argparse.ArgumentParser) -> list[str]:
    draw = w.draw
    argv = list(path) + _fixed(w.data, w, path)
    options = [a for a in parser._actions
               if a.option_strings and not isinstance(a, argparse._HelpAction)]
    required = [a for a in options if a.required]
    chosen = draw(st.lists(st.sampled_from(options), max_size=4)) if options else []
    for a in required + chosen:
        flag = draw(st.sampled_from(a.option_strings))
        if a.nargs == 0:
            argv.append(flag)
        elif a.nargs == "?" and draw(st.booleans()):
            argv.append(flag)
        else:
            argv += [flag, _value(w, path, a)]
    for a in parser._actions:
        if a.option_strings or isinstance(a, argparse._HelpAction):
            continue
        count = {None: 1, "?": draw(st.integers(0, 1)), "+": draw(st.integers(1, 3)),
                 "*": draw(st.integers(0, 2))}.get(a.nargs, 1)
        argv += [_value(w, path, a) for _ in range(count)]
    return argv


# --- running one ---------------------------------------------------------------------

class _NoBar(tqdm.tqdm):
    """Progress bars off (they would be lines on stderr)."""

    def __init__(self, *args, **kwargs):
        kwargs["disable"] = True
        super().__init__(*args, **kwargs)


def _on_alarm(signum, frame):
    raise _OverBudget()


def run_cli(argv: list[str], heavy: list[str]) -> tuple[int, str, str]:
    """(status, stdout, stderr) of `tierlab ARGV` in this process; a stubbed
    entry point reached counts as status 0."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(EXAMPLE_BUDGET_S)
    try:
        with contextlib.ExitStack() as stack:
            for target in heavy:
                stack.enter_context(mock.patch(target, _stub))
            stack.enter_context(mock.patch("tqdm.tqdm", _NoBar))
            stack.enter_context(contextlib.redirect_stdout(out))
            stack.enter_context(contextlib.redirect_stderr(err))
            try:
                rc = main(argv)
            except SystemExit as e:  # argparse
                rc = e.code if isinstance(e.code, int) else 2
            except _Reached:
                rc = 0
    except _OverBudget:
        pytest.fail(f"over {EXAMPLE_BUDGET_S} s: tierlab {' '.join(map(repr, argv))}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue()


def check(path: tuple, argv: list[str], rc, err: str) -> None:
    shown = "tierlab " + " ".join(map(repr, argv))
    assert "Traceback" not in err, f"{shown}\n{err}"
    allowed = {0, 2} | ({1} if path in STATUS_1 else set())
    assert rc in allowed, f"{shown}: exit status {rc}\n{err}"
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) <= 1, f"{shown}: {len(lines)} lines on stderr\n{err}"


@settings(max_examples=MAX_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(d=st.data())
def test_every_command_takes_any_arguments_without_a_traceback(tiny, d):
    name = d.draw(st.sampled_from(sorted(COMMANDS)), label="command")
    w = World(tiny, d.draw)
    try:
        argv = _argv(w, name, COMMANDS[name])
        d.draw(st.just(argv), label="argv")
        rc, _, err = run_cli(argv, HEAVY.get(name, []))
        check(name, argv, rc, err)
    finally:
        shutil.rmtree(w.dir, ignore_errors=True)


def test_every_command_is_fuzzed():
    """The walk finds the command groups of the CLI (a sanity check of _leaves)."""
    groups = {p[0] for p in COMMANDS}
    assert {"list", "bench", "corpus", "workload", "index", "query", "trace", "apcache",
            "model", "validate"} <= groups
    assert ("apcache", "run") in COMMANDS and ("model", "sweep") in COMMANDS
