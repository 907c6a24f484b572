# `make demo` and `make test` are the README's two commands; both set up .venv from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# The real peers of tests/conformance and tests/autobahn: Node 22, the official MCP conformance
# suite and TypeScript SDKs from the committed package-lock.json, and the Autobahn TestSuite,
# which needs Python 2.7 (pyenv's on these machines; `make test PY27=...` elsewhere).
PY27 ?= /root/.pyenv/versions/2.7.18/bin/python2.7
NODE_STAMP := node_modules/.installed
AUTOBAHN := .autobahn
AUTOBAHN_STAMP := $(AUTOBAHN)/.installed
PEERS := $(NODE_STAMP) $(AUTOBAHN_STAMP)

.PHONY: demo test test-compiled test-pure peers bench bench-micro clean

# A typed module is compiled from its .py, typed by the .pxd beside it: a change to either rebuilds.
TYPED := $(wildcard clientmcp_fast/*/*.pxd)

$(STAMP): pyproject.toml setup.py $(wildcard _speedups/*.pyx _speedups/*.pxd) $(TYPED) $(TYPED:.pxd=.py)
	$(PYTHON) -m venv $(VENV)
	CLIENTMCP_BUILD_EXTENSION=yes $(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: $(STAMP)
	$(BIN)/clientmcp demo

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

$(AUTOBAHN_STAMP): tests/autobahn/requirements-py27.txt
	@test -x $(PY27) || { echo "Python 2.7 is missing at $(PY27): the Autobahn TestSuite needs it (make test PY27=...)" >&2; exit 1; }
	rm -rf $(AUTOBAHN)
	$(PY27) -m pip install --quiet --disable-pip-version-check --no-warn-script-location --target $(AUTOBAHN) -r $<
	touch $(AUTOBAHN)/zope/__init__.py  # the zope namespace package, as a plain package under --target
	touch $@

peers: $(PEERS)

# The whole suite twice: with the compiled _speedups (required to be live), then the pure twins.
# Both passes include the conformance suite, the TypeScript SDK agents and Autobahn: they drive
# the frame parser and routing whose two twins the passes select (about a minute a pass).
test: test-compiled test-pure

test-compiled: $(STAMP) $(PEERS)
	CLIENTMCP_BUILD_EXTENSION=yes CLIENTMCP_PY27=$(PY27) $(BIN)/python -m pytest

test-pure: $(STAMP) $(PEERS)
	CLIENTMCP_NO_EXTENSIONS=1 CLIENTMCP_PY27=$(PY27) $(BIN)/python -m pytest

# The benchmark of docs/benchmarks.md: `make bench`, or `make bench BENCH_ARGS=--quick`. Needs wrk (apt-get install -y wrk).
$(BENCH_STAMP): $(STAMP)
	CLIENTMCP_BUILD_EXTENSION=yes $(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

bench: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# The pytest-benchmark micro benchmarks of each hot-path function, compiled and pure (bench/micro).
bench-micro: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m pytest bench/micro -q $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info clientmcp_fast/*/*.so _speedups/*.c bench/_build node_modules $(AUTOBAHN) reports
