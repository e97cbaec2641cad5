# tierlab — the two commands a new user needs are `make demo` and `make test`.
# Everything is installed from Debian packages and PyPI by the targets below.

PYTHON   ?= python3
VENV     ?= .venv
BUILD    ?= build
JOBS     ?= 2
# Debian packages the build, the tests and the peers need.
DEB_PKGS := cmake make gcc g++ clang llvm libclang-rt-14-dev libstreamvbyte-dev \
            python3 python3-venv python3-dev pkg-config valgrind
# Debian packages only the tests need: a one-node Slurm for the workflow's
# cluster profile (tests/workflows/test_slurm.py) and Chromium to render its
# report; a test whose package could not be installed is skipped, saying why.
TEST_DEB_PKGS := slurm-wlm munge chromium
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN      := $(VENV)/bin
NATIVE   := tierlab/_native

.PHONY: all deps test-deps venv build memtrace test demo bench clean help peers bench-real
all: build

help:
	@echo "make demo   install everything, run the workflow (workflows/) and print its report"
	@echo "make test   run all tests (C unit, sanitizer and fuzz runs, Python)"
	@echo "make bench  run the full benchmarks, JSON under bench/results/"
	@echo "make peers  build upstream SIMD StreamVByte (crates.io) for bench codecs"
	@echo "make bench-real  index GCIDE (Debian dict-gcide) and report its overhead"

# Installs only what is missing, so repeated runs do not touch apt.
deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

test-deps:
	@missing=$$(for p in $(TEST_DEB_PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for the tests:" $$missing; \
	  ( $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing ) \
	    || echo "note: could not install $$missing; the tests that need them are skipped"; \
	fi

venv: deps $(BIN)/.installed

# Release build with warnings as errors; the library and its header are copied
# next to the Python binding.
build: deps
	cmake -S kernels -B $(BUILD)/release -DCMAKE_BUILD_TYPE=Release -DTIERLAB_WERROR=ON > /dev/null
	cmake --build $(BUILD)/release -j $(JOBS) -- --no-print-directory
	mkdir -p $(NATIVE)
	@# copy then rename: overwriting a loaded .so in place crashes running processes
	for f in $(BUILD)/release/libtierlab.so kernels/include/tierlab.h $(BUILD)/release/tierlab-kernels; do \
	  cp $$f $(NATIVE)/.tmp.$$(basename $$f) && mv -f $(NATIVE)/.tmp.$$(basename $$f) $(NATIVE)/$$(basename $$f); \
	done

# The tracing build of the kernels (traces/memtrace.md) in $(BUILD)/memtrace;
# `tierlab trace memory` builds it on first use as well.
memtrace: venv
	TIERLAB_BUILD_DIR=$(BUILD) $(BIN)/python -c "from tierlab.engine.memtrace import build; print(build($(JOBS)))"

# The sanitizer build and the fuzzers are built and run from pytest
# (tests/kernels/), so `pytest` alone is the whole test suite.
test: venv build test-deps
	$(BIN)/pytest -q

# The whole pipeline on workflows/config/config.yaml (workflows/README.md),
# then its HTML report; the last line printed is where the report is.
demo: venv build
	cd workflows && $(abspath $(BIN))/snakemake --profile profiles/local
	cd workflows && $(abspath $(BIN))/snakemake --report results/demo/report.html > results/demo/logs/report.log 2>&1
	@echo "report: $(CURDIR)/workflows/results/demo/report.html"

# Full-size benchmarks; each writes JSON (and a plot) under bench/results/.
# Then the tests marked slow or bench (pyproject.toml): the long runs and the
# measured magnitudes that `make test` leaves out.
bench: venv build
	$(BIN)/tierlab bench codecs --out bench/results/codecs.json --plot bench/results/codecs.png
	$(BIN)/tierlab bench index --out bench/results/index.json --plot bench/results/index.png
	$(BIN)/tierlab bench pisa --out bench/results/pisa.json
	$(BIN)/tierlab bench integrity --out bench/results/integrity.json
	$(BIN)/tierlab bench cache --out bench/results/cache.json
	$(BIN)/tierlab bench model --out bench/results/model.json
	$(BIN)/tierlab bench memtrace --out bench/results/memtrace.json --lackey-queries 3
	$(BIN)/tierlab sim compare --out bench/results/sims.json
	$(BIN)/tierlab bench memsim --out bench/results/memsim.json
	rm -rf bench/results/reference-compare  # cells of an older model would be reused
	$(BIN)/tierlab model reference --compare --out bench/results/reference-compare --no-progress > bench/results/reference-compare.txt
	$(BIN)/pytest -q -m "slow or bench"

# The SIMD StreamVByte peer of `tierlab bench codecs`: upstream's C library
# (lemire/streamvbyte) as crates.io's streamvbyte-sys 0.1.0 vendors it. cargo
# fetches the crate (and, as sources only, its build dependencies cmake, cc,
# shlex, find-msvc-tools) for a throwaway manifest; the C files are compiled
# here with -O3 -march=native into $(BUILD)/peers/libstreamvbyte_upstream.so.
PEERS := $(BUILD)/peers
peers:
	mkdir -p $(PEERS)/crate/src && touch $(PEERS)/crate/src/lib.rs
	printf '[package]\nname = "tierlab-peers"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nstreamvbyte-sys = "=0.1.0"\n' > $(PEERS)/crate/Cargo.toml
	cargo fetch -q --manifest-path $(PEERS)/crate/Cargo.toml
	src=$$(cargo metadata -q --format-version 1 --manifest-path $(PEERS)/crate/Cargo.toml | \
	  $(PYTHON) -c 'import json, os, sys; print(next(os.path.dirname(p["manifest_path"]) for p in json.load(sys.stdin)["packages"] if p["name"] == "streamvbyte-sys"))')/external/streamvbyte; \
	cc -O3 -march=native -std=c99 -fPIC -shared -I$$src/include \
	  $$src/src/streamvbyte_decode.c $$src/src/streamvbyte_encode.c \
	  $$src/src/streamvbytedelta_decode.c $$src/src/streamvbytedelta_encode.c \
	  -o $(PEERS)/.tmp.libstreamvbyte_upstream.so && \
	mv -f $(PEERS)/.tmp.libstreamvbyte_upstream.so $(PEERS)/libstreamvbyte_upstream.so
	@echo "built $(PEERS)/libstreamvbyte_upstream.so (upstream StreamVByte, -O3 -march=native)"

# Real text: GCIDE (Debian's dict-gcide, installed only on this path), one
# document per dictionary entry, indexed with pfor-delta256; `index info`
# reports skip list + dictionary against the postings (issue 24).
REAL := $(BUILD)/real
bench-real: venv build
	@dpkg-query -W -f='$${Status}' dict-gcide 2>/dev/null | grep -q 'ok installed' || \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq dict-gcide; }
	mkdir -p $(REAL) bench/results
	$(BIN)/tierlab corpus ingest /usr/share/dictd/gcide.dict.dz --format paragraphs --skip-bad --out $(REAL)/gcide.txt --quiet
	$(BIN)/tierlab index build $(REAL)/gcide.txt --out $(REAL)/gcide-pfor-delta256 --codec pfor-delta256 --force --quiet
	$(BIN)/tierlab index info $(REAL)/gcide-pfor-delta256
	$(BIN)/tierlab index info $(REAL)/gcide-pfor-delta256 --json > bench/results/real-gcide-index.json

clean:
	rm -rf $(BUILD) $(NATIVE)
