# tierlab — the two commands a new user needs are `make demo` and `make test`.
# Everything is installed from Debian packages and PyPI by the targets below.

PYTHON   ?= python3
VENV     ?= .venv
BUILD    ?= build
JOBS     ?= 2
# Debian packages the build, the tests and the peers need.
DEB_PKGS := cmake make gcc g++ clang llvm libclang-rt-14-dev libstreamvbyte-dev \
            python3 python3-venv python3-dev pkg-config valgrind
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN      := $(VENV)/bin
NATIVE   := tierlab/_native

.PHONY: all deps venv build memtrace test demo bench clean help
all: build

help:
	@echo "make demo   install everything, run the codec benchmark on generated data"
	@echo "make test   run all tests (C unit, sanitizer and fuzz runs, Python)"
	@echo "make bench  run the full benchmarks, JSON under bench/results/"

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
test: venv build
	$(BIN)/pytest -q

demo: venv build
	$(BIN)/tierlab bench codecs --out bench/results/codecs-demo.json --plot bench/results/codecs-demo.png

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
	$(BIN)/tierlab sim compare --out bench/results/sims.json
	$(BIN)/tierlab bench memsim --out bench/results/memsim.json
	$(BIN)/pytest -q -m "slow or bench"

clean:
	rm -rf $(BUILD) $(NATIVE)
