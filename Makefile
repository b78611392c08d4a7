# The two commands (see README):  make run   |   make test
# Everything else here is a step they share.
SHELL := /bin/bash
# The interpreter the venv is made with: PYTHON=... when given, else the newest of python3.13,
# python3.12, python3.11, python3 that works (Python 3.11-3.13; CI runs 3.11). tools/python.sh
# runs each candidate (a pyenv shim is on PATH for every installed version but fails unless that
# version is selected) and says in one line what to install when none fits: make stops there.
PYTHON_CHECK := $(shell tools/python.sh $(PYTHON))
ifneq ($(firstword $(PYTHON_CHECK)),ok)
$(error $(PYTHON_CHECK))
endif
PYTHON := $(lastword $(PYTHON_CHECK))
# An existing venv keeps the interpreter it was made with (delete it to switch). VENV=DIR on the
# command line uses another one (make test-python does).
VENV := .venv
VENV_PY := $(VENV)/bin/python
SHARED ?= ../shared
# where the converters look for real weights by name (modelcontract/paths.py), and the tests too
export DATARAILROAD_SHARED ?= $(abspath $(SHARED))
YOLOV5N_WEIGHTS ?= $(SHARED)/models/yolov5n.pt
HOST ?= 127.0.0.1
PORT ?= 8000
HTTPS ?=

.PHONY: official-models demo-models run test test-all test-python test-fast lint setup models serve tools system-deps clean-models bench cluster cluster-stop serve-install

# Serves as soon as the install is done: the models build beside the server in two chains (one
# build keeps about one core busy), each shown on the pages once installed (the server reads
# the models folder at each request): the demos' own (hands, classifier, YOLOv5n) and the
# official Ultralytics checkpoint of each task (YOLO11n first). Each chain is a process group of
# its own, stopped with the server (Ctrl+C); logs in models/build-*.log.
run: tools setup serve-install
	@mkdir -p models; \
	  setsid $(MAKE) --no-print-directory demo-models > models/build-demos.log 2>&1 & demos=$$!; \
	  setsid $(MAKE) --no-print-directory official-models > models/build-official.log 2>&1 & official=$$!; \
	  trap 'kill -- -$$demos -$$official 2>/dev/null' EXIT INT TERM; \
	  echo "Building the models beside the server; each page shows its model once built (models/build-demos.log, models/build-official.log)"; \
	  $(MAKE) --no-print-directory serve

# The modules run on TEST_WORKERS pytest-xdist workers (tests/conftest.py groups them): the
# suite mostly waits on browsers and servers. A third worker starved live-camera tests on 2
# cores (docs/development.md "Workers").
# Tests marked slow (minutes each of a clip's real time or SwiftShader's WebGPU, on paths other
# tests also cover) are left out; make test-all runs them too. The slowest 25 print last.
TEST_WORKERS ?= 2
TEST_MARKS ?= not slow
test: tools system-deps setup lint
	@set +e; $(VENV_PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 \
	  $(if $(TEST_MARKS),-m "$(TEST_MARKS)") $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; rc=0; fi; exit $$rc

# The suite on another interpreter: make test-python PY=3.13 (or 3.11, 3.12) finds python3.13 on
# PATH, else pyenv's installed 3.13, and runs make test with a venv of its own (.venv-py3.13).
# Tests that need MediaPipe's own runtime skip where its wheel cannot install (3.13).
ifneq ($(filter test-python,$(MAKECMDGOALS)),)
TEST_PYTHON := $(shell tools/python.sh --version "$(PY)")
ifneq ($(firstword $(TEST_PYTHON)),ok)
$(error $(TEST_PYTHON))
endif
endif
test-python:
	$(MAKE) test PYTHON=$(lastword $(TEST_PYTHON)) VENV=.venv-py$(PY)

# Every test, the slow ones too.
test-all:
	$(MAKE) test TEST_MARKS=

# The unit part only (tests/unit: no model built, no browser, no server processes): the loop
# while editing.
test-fast:
	$(MAKE) test PYTEST_ARGS='tests/unit $(PYTEST_ARGS)'

# pyproject.toml holds ruff's rule set, eslint.config.js ESLint's (static/js, the converters' .mjs):
# bugs, not style.
lint: setup
	$(VENV)/bin/ruff check .
	node_modules/.bin/eslint .

setup: $(VENV)/.installed node_modules/.package-lock.json

# torch first is not needed: the exact pins make pip take the CPU-usable wheels it has.
# tensorflowjs & co. go in without their declared deps (they would replace tensorflow-cpu).
# triton (pulled by torch) segfaults when TF is imported first; CPU use never needs it.
# Last, the project itself, editable and without deps (pyproject.toml): imports by name everywhere.
# --no-compile: pip would byte-compile every installed file (70 s of the 165 s a fresh install
# took here); Python compiles what is imported, once, on first use.
$(VENV)/.installed: requirements.txt requirements-app.txt requirements-nodeps.txt pyproject.toml
	test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install --disable-pip-version-check --no-compile -q -r requirements.txt
	$(VENV_PY) -m pip install --disable-pip-version-check --no-compile -q --no-deps -r requirements-nodeps.txt
	$(VENV_PY) -m pip uninstall -y -q triton || true
	$(VENV_PY) -m pip install --disable-pip-version-check --no-compile -q --no-deps -e .
	touch $@

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# Converts every model whose weights can be had here; reports the others with their fix.
models: demo-models official-models

# The demos' models, quickest first. yolov5n twice: 640 px (yolov5n) and 320 px (yolov5n-320, its
# own folder), the shared weights when present. EfficientNetV2-B0 needs its download.
demo-models: setup
	@for name in handpose efficientnet-lite0 efficientnetv2-b0; do \
	  $(VENV_PY) -m converters $$name || echo "($$name was not built: see the fix above; the app serves the others)"; done
	@if [ -f "$(YOLOV5N_WEIGHTS)" ]; then for size in 640 320; do \
	  $(VENV_PY) -m converters yolov5n --imgsz $$size --weights "$(YOLOV5N_WEIGHTS)" || exit 1; done; \
	else for size in 640 320; do \
	  $(VENV_PY) -m converters yolov5n --imgsz $$size || echo "(yolov5n was not built: see the fix above)"; done; fi

# The official Ultralytics checkpoints (converters/ultralytics_yolo/official.py), one per task: from
# $(SHARED)/models when there, else downloaded by name; one line for each that can't be had.
official-models: setup
	$(VENV_PY) -m converters official

# The server as in production (server/front.py): HAProxy on HOST:PORT in front of gunicorn, one
# process group, from the serving install (.venv-serve: requirements-serve.txt's faster LiteRT).
# HTTPS=1: https with a local CA's certificate (server/certs.py, made once in certs/), so phones
# on the LAN (HOST=0.0.0.0) get the camera; docs/phones-offline.md.
serve: serve-install node_modules/.package-lock.json
ifeq ($(HTTPS),1)
	@DATARAILROAD_PORT=$(PORT) $(SERVE_VENV)/bin/python -m server.certs --host $(HOST)
endif
	@echo "DataRailroad on $(if $(filter 1,$(HTTPS)),https,http)://$(HOST):$(PORT)/  (Ctrl+C stops)"
	DATARAILROAD_HTTPS=$(HTTPS) DATARAILROAD_HOST=$(HOST) DATARAILROAD_PORT=$(PORT) $(SERVE_VENV)/bin/python -m server.front

# Python's venv module and Node/npm, from Debian when missing (as root).
tools:
	@missing=""; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $$missing; \
	  else echo "missing:$$missing (sudo apt-get install$$missing)"; exit 1; fi; fi

# Chromium for the browser tests (Debian packages; test tools' own browser downloads fail offline).
system-deps:
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver fonts-noto-color-emoji; \
	  else echo "chromium is missing: sudo apt-get install chromium chromium-driver"; exit 1; fi; fi

bench: setup
	$(VENV_PY) -m bench.convert

clean-models:
	rm -rf models

# A local Ray Serve cluster (docs/scaling.md): a head + NODES-1 worker nodes on this
# machine, the app deployed from server/cluster/serve.yaml; returns once /healthz answers.
NODES ?= 2
RAY_PORT ?= 6380
RAY_NODE_PORTS ?= 10000
cluster: setup
	$(VENV_PY) -m server.cluster up --nodes $(NODES) --port $(PORT) --ray-port $(RAY_PORT) --node-ports $(RAY_NODE_PORTS)

cluster-stop:
	$(VENV_PY) -m server.cluster down --ray-port $(RAY_PORT)

# The slim runtime that serves (make serve), and what serving machines and cluster nodes install:
# no converter dependencies.
SERVE_VENV ?= .venv-serve
serve-install: $(SERVE_VENV)/.installed

$(SERVE_VENV)/.installed: requirements-serve.txt requirements-app.txt pyproject.toml
	test -x $(SERVE_VENV)/bin/python || $(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/python -m pip install --disable-pip-version-check --no-compile -q -r requirements-serve.txt
	$(SERVE_VENV)/bin/python -m pip install --disable-pip-version-check --no-compile -q --no-deps -e .
	touch $@
