# `make demo` and `make test` are the README's two commands; both set up .venv from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-compiled test-pure bench clean

$(STAMP): pyproject.toml setup.py $(wildcard _speedups/*.pyx _speedups/*.pxd)
	$(PYTHON) -m venv $(VENV)
	CLIENTMCP_BUILD_EXTENSION=yes $(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: $(STAMP)
	$(BIN)/clientmcp demo

# The whole suite twice: with the compiled _speedups (required to be live), then the pure twins.
test: test-compiled test-pure

test-compiled: $(STAMP)
	CLIENTMCP_BUILD_EXTENSION=yes $(BIN)/python -m pytest

test-pure: $(STAMP)
	CLIENTMCP_NO_EXTENSIONS=1 $(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build *.egg-info clientmcp_fast/_speedups/*.so _speedups/*.c
