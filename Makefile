# `make demo` and `make test` are the README's two commands; both set up .venv from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
FUZZ_STAMP := $(VENV)/.installed-fuzz
# The real peers of tests/conformance and tests/autobahn: Node 22, the official MCP conformance
# suite and TypeScript SDKs from the committed package-lock.json (with the JavaScript client's
# runtimes and tools for tests/js: Deno, Bun, TypeScript, esbuild), and the Autobahn TestSuite,
# which needs Python 2.7: python2.7 on PATH if it runs, else pyenv's (`make test PY27=...` to choose).
PY27 ?= $(shell scripts/prerequisites python27)
NODE_STAMP := node_modules/.installed
AUTOBAHN := .autobahn
AUTOBAHN_STAMP := $(AUTOBAHN)/.installed
PEERS := $(NODE_STAMP) $(AUTOBAHN_STAMP)

.PHONY: demo cluster-demo prerequisites test test-compiled test-pure test-container test-arm64 test-bench peers bench bench-burst bench-cluster bench-frozen bench-micro fuzz binary image clean

# What clientmcp_fast/compiled.py lists is built: a change to any of its sources rebuilds (a
# typed module is compiled from its .py, typed by the .pxd beside it). In a checkout, importing
# the package refuses a compiled module older than its sources (clientmcp_fast/__init__.py).
HOT_PATHS := $(wildcard clientmcp_fast/_speedups/*.pyx clientmcp_fast/_speedups/*.pxd vendor/llhttp/*/*)
TYPED := $(filter-out clientmcp_fast/_speedups/%,$(wildcard clientmcp_fast/*/*.pxd))

$(STAMP): pyproject.toml setup.py clientmcp_fast/compiled.py $(HOT_PATHS) $(TYPED) $(TYPED:.pxd=.py)
	$(PYTHON) -m venv $(VENV)
	CLIENTMCP_BUILD_EXTENSION=yes $(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: $(STAMP)
	$(BIN)/clientmcp demo

# Three instances joined through nats-server behind nginx on port 8080 (docs/scaling.md, Three instances behind one port);
# `make cluster-demo CLUSTER_DEMO_ARGS=--port=9090` for another port.
cluster-demo: $(STAMP)
	$(BIN)/python examples/cluster_demo.py $(CLUSTER_DEMO_ARGS)

# npm runs on the machine's Node, which may be older than the Node 22 it installs for the peers:
# their EBADENGINE warnings say so and nothing else, hence warnings are not printed.
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(AUTOBAHN_STAMP): tests/autobahn/requirements-py27.txt
	@test -x "$(PY27)" || { echo "Python 2.7 is missing: the Autobahn TestSuite needs it (make test PY27=...)" >&2; exit 1; }
	rm -rf $(AUTOBAHN)
	$(PY27) -m pip install --quiet --disable-pip-version-check --no-warn-script-location --target $(AUTOBAHN) -r $<
	touch $(AUTOBAHN)/zope/__init__.py  # the zope namespace package, as a plain package under --target
	touch $@

peers: $(PEERS)

# The frozen bridge (docs/deployment.md), both from the Dockerfile, built with a Docker engine or
# podman: `make image`, and `make binary`, which writes dist/clientmcp, one static file. Both
# always ask the builder, whose layer cache makes an unchanged tree cost seconds.
# `make image PLATFORM=linux/arm64` builds for another platform under qemu (docs/deployment.md,
# The arm64 image), tagged with its architecture: clientmcp-arm64 beside clientmcp.
PLATFORM ?=
IMAGE ?= clientmcp$(if $(PLATFORM),-$(word 2,$(subst /, ,$(PLATFORM))))

image:
	PLATFORM=$(PLATFORM) packaging/build.sh image $(IMAGE)

binary:
	PLATFORM=$(PLATFORM) packaging/build.sh binary dist
	@ls -l dist/clientmcp

# The whole suite twice: with the compiled _speedups (required to be live), then the pure twins.
# Both passes include the conformance suite, the TypeScript SDK agents and Autobahn: they drive
# the frame parser and routing whose two twins the passes select (about a minute a pass). Then
# the frozen builds: the image's filesystem and dist/clientmcp, each run from its own root, and
# the command-line tests (revoke's too) again against dist/clientmcp. Last, the arm64 image,
# built and run under qemu (docs/deployment.md, The arm64 image).
test: test-compiled test-pure test-container test-arm64

# What the machine must have, checked in a second before any setup or download. As root on Debian,
# the missing packages are installed first, in one apt-get call; otherwise they are listed.
prerequisites:
	@PATH="$$PATH:/usr/sbin:/sbin" PYTHON=$(PYTHON) PY27=$(PY27) scripts/prerequisites

test-compiled: prerequisites $(STAMP) $(PEERS)
	CLIENTMCP_BUILD_EXTENSION=yes CLIENTMCP_PY27=$(PY27) $(BIN)/python -m pytest --ignore=tests/container

test-pure: prerequisites $(STAMP) $(PEERS)
	CLIENTMCP_NO_EXTENSIONS=1 CLIENTMCP_PY27=$(PY27) $(BIN)/python -m pytest --ignore=tests/container

test-container: prerequisites $(STAMP) image binary
	CLIENTMCP_IMAGE=$(IMAGE) $(BIN)/python -m pytest tests/container --ignore=tests/container/test_arm64.py
	CLIENTMCP_COMMAND=$(CURDIR)/dist/clientmcp $(BIN)/python -m pytest tests/e2e/test_cli.py tests/e2e/test_health.py tests/e2e/test_revocation.py

# The image for linux/arm64, built here under qemu, and run from its filesystem under qemu as
# tests/container runs the machine's own (tests/container/test_arm64.py); part of `make test`,
# as building and checking it fit in 25 minutes from nothing (docs/deployment.md, The arm64 image).
ARM64_IMAGE ?= clientmcp-arm64

test-arm64: prerequisites $(STAMP)
	PLATFORM=linux/arm64 packaging/build.sh image $(ARM64_IMAGE)
	CLIENTMCP_ARM64_IMAGE=$(ARM64_IMAGE) $(BIN)/python -m pytest tests/container/test_arm64.py

# The bench's own tests (bench/tests): its harness's round trips, counted with valgrind, and its
# arithmetic, and a short run of bench/cluster.py (which compiles bench/app.pyx: the bench extra).
# Kept out of `make test`, whose machine need not have valgrind; CI runs both.
test-bench: $(STAMP) $(BENCH_STAMP)
	@command -v valgrind >/dev/null || { echo "make test-bench: valgrind is missing: the bench harness's instructions are counted with it; apt-get install valgrind" >&2; exit 1; }
	$(BIN)/python -m pytest bench/tests

# The benchmark of docs/benchmarks.md: `make bench`, or `make bench BENCH_ARGS=--quick`. Needs wrk (apt-get install -y wrk).
$(BENCH_STAMP): $(STAMP)
	CLIENTMCP_BUILD_EXTENSION=yes $(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

bench: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# One app's burst of registers against unread notification streams (bench/burst.py).
bench-burst: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m bench.burst $(BENCH_ARGS)

# A call forwarded between two instances through NATS against a local call, and --workers 2
# against one process (bench/cluster.py). Needs nats-server (apt-get install -y nats-server).
bench-cluster: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m bench.cluster $(BENCH_ARGS)

# The frozen builds beside the virtualenv install, in one run (bench/frozen.py); as root.
bench-frozen: $(STAMP) $(BENCH_STAMP) image binary
	$(BIN)/python -m bench.frozen $(BENCH_ARGS)

# The pytest-benchmark micro benchmarks of each hot-path function, compiled and pure (bench/micro).
bench-micro: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m pytest bench/micro -q $(BENCH_ARGS)

# The fuzz targets of tests/fuzz (docs/fuzzing.md), FUZZ_RUNS inputs each, compiled then pure:
# about 6 minutes with the default (docs/fuzzing.md, Figures). `make fuzz FUZZ_RUNS=10000` for a short run.
FUZZ_RUNS ?= 100000
$(FUZZ_STAMP): $(STAMP)
	CLIENTMCP_BUILD_EXTENSION=yes $(BIN)/pip install --quiet -e '.[test,fuzz]'
	touch $@

fuzz: $(STAMP) $(FUZZ_STAMP)
	$(BIN)/python -m tests.fuzz --runs $(FUZZ_RUNS)
	CLIENTMCP_NO_EXTENSIONS=1 $(BIN)/python -m tests.fuzz --runs $(FUZZ_RUNS)

clean:
	rm -rf $(VENV) build dist *.egg-info clientmcp_fast/*/*.so bench/_build node_modules $(AUTOBAHN) reports
