# Every workflow of the course is a target here. Students: `make lab`. Everyone: `make test`.
# Instructors: `make release`, `make autograde`, `make feedback`, `make grades`, `make report`,
# `make demo`.
# Each target creates .venv first when it is missing, so a fresh clone needs only
# python3.12 and make.

SHELL := /bin/bash
PYTHON ?= python3.12
VENV := .venv
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# nbgrader runs `alembic` in a subprocess: the venv's bin/ must be on PATH (done above).
ASSIGNMENTS := $(sort $(notdir $(wildcard source/[0-9][0-9]_*)))
WORKERS ?=
# Grading needs bubblewrap (package bubblewrap) and stops without it. ALLOW_UNSANDBOXED=1
# grades anyway where it is missing (make autograde, make demo): only notebooks you trust.
ALLOW_UNSANDBOXED ?=
UNSANDBOXED := $(if $(filter 1 yes true,$(ALLOW_UNSANDBOXED)),--allow-unsandboxed)
# Two pytest workers by default; modules grade in parallel (PYTEST_ARGS=-n0 for one).
PYTEST_ARGS ?= -n 2 --dist loadgroup
BENCH_ARGS ?=
LAB_PORT ?= 8888
# Extra JupyterLab options, e.g. LAB_ARGS="--no-browser --ip=127.0.0.1"
LAB_ARGS ?=
# The folder JupyterLab runs in and serves, and the one it opens. On a course server a
# student serves their home, where the Assignment List fetches to: make lab LAB_DIR=~ LAB_OPEN=
LAB_DIR ?= .
LAB_OPEN ?= release

# make hub: the course on a JupyterHub for a demo class (docs/shared-server.md). Run
# as root; it prints what it created and `make hub-clean` removes all of it.
HUB_PREFIX ?= /opt/jaxcourse
HUB_PORT ?= 8000
HUB_STUDENTS ?= ada ben
HUB_INSTRUCTORS ?= grace
# The OS group of the class: only its members can enter the exchange's folder.
HUB_GROUP ?= jax-xla
# HUB_KEEP_ENV=1: make hub-clean keeps HUB_PREFIX/python and HUB_PREFIX/env (a cache).
HUB_KEEP_ENV ?=
HUB_PROXY := hub/node_modules/.bin/configurable-http-proxy

.PHONY: help venv lab test test-hosts release check-release rubric autograde feedback grades report demo bench clean hub hub-clean

help:
	@echo "Students:    make lab        start JupyterLab on release/ (creates .venv first)"
	@echo "Everyone:    make test       run the whole test-suite (creates .venv first)"
	@echo "Sandbox:     make test-hosts the grading sandbox in a Debian 12 guest (qemu; see docs/isolation.md)"
	@echo "Instructors: make release | rubric | autograde | feedback | grades | report | demo"
	@echo "Course hub:  make hub        (root) JupyterHub for a demo class; make hub-clean removes it"
	@echo "Assignments: $(ASSIGNMENTS)"

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "error: $(PYTHON) was not found. Install Python 3.12 (e.g. 'pyenv install 3.12', or your OS package 'python3.12' with venv), then run make again; or point make at it: make PYTHON=/path/to/python3.12 $(MAKECMDGOALS)"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' || { \
	  echo "error: $(PYTHON) is $$($(PYTHON) --version 2>&1), but the course needs Python 3.12 (jax 0.12 requires it). Run: make PYTHON=/path/to/python3.12 $(MAKECMDGOALS)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -r requirements.txt
	$(VENV)/bin/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# The student's view: JupyterLab on the released notebooks, with nbgrader's
# Assignment List and Validate extensions explicitly enabled.
lab: $(STAMP)
	@jupyter server extension enable --sys-prefix nbgrader.server_extensions.assignment_list >/dev/null 2>&1
	@jupyter server extension enable --sys-prefix nbgrader.server_extensions.validate_assignment >/dev/null 2>&1
	@jupyter labextension enable --level=sys_prefix @jupyter/nbgrader:assignment-list >/dev/null 2>&1
	@jupyter labextension enable --level=sys_prefix @jupyter/nbgrader:validate-assignment >/dev/null 2>&1
	@echo "nbgrader: Assignment List and Validate enabled; opening $(LAB_DIR)/$(LAB_OPEN)"
	cd $(LAB_DIR) && jupyter lab --notebook-dir=. --LabApp.default_url=/lab/tree/$(LAB_OPEN) --port=$(LAB_PORT) \
	  $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# Every test's time (setup, call and teardown) goes to artifacts/pytest.xml: where the
# suite's time goes, beyond the 30 slowest steps it prints.
test: $(STAMP)
	python -m pytest $(PYTEST_ARGS) --junitxml=artifacts/pytest.xml

# The grading sandbox on a real kernel (docs/isolation.md): builds a Debian 12 guest
# image (root, mmdebstrap, qemu-system-x86; cached in HOSTS_CACHE, rebuilt when
# tests/hosts/guest.py's recipe changes), boots it and grades corpus cases there as root
# (cgroup v2), as an instructor with a systemd session and as one without. Not part of
# make test. HOSTS_LEVELS="root" and HOSTS_CASES="honest_full bomb_memory" run fewer
# levels and cases (names: tests/hosts/inside.py, tests/corpus/cases.py);
# HOSTS_OVERLAY="grader/sandbox/cgroup_v2.py=/tmp/changed.py" tries a file in the guest only.
HOSTS_CACHE ?= .cache/hosts
HOSTS_LEVELS ?=
HOSTS_CASES ?=
test-hosts: $(STAMP)
	JAXCOURSE_HOSTS_CACHE=$(abspath $(HOSTS_CACHE)) HOSTS_LEVELS="$(HOSTS_LEVELS)" HOSTS_CASES="$(HOSTS_CASES)" \
	  python -m pytest tests/hosts -m hosts -p no:cacheprovider

# release/ is generated from source/ (solutions and hidden tests stripped) and committed.
release: $(STAMP)
	python -m autograder release $(ASSIGNMENTS)

# Fails when release/ differs from what `make release` would write.
check-release: $(STAMP)
	python -m autograder release --check $(ASSIGNMENTS)

# Each exercise's requirements, the checks that judge them and their points.
rubric: $(STAMP)
	python -m autograder rubric $(ASSIGNMENTS)

# Grades everything in submitted/<student>/<assignment>/ into the gradebook, sandboxed:
# WORKERS=N (default: 1.5 per core, c.Grading.workers), SCHEDULER=tcp://host:8786 for Dask,
# ALLOW_UNSANDBOXED=1 where bubblewrap is missing (trusted notebooks only).
# An assignment that fails does not stop the others; make fails at the end, naming it.
autograde: $(STAMP)
	@failed=; for a in $(ASSIGNMENTS); do \
	  if ls -d submitted/*/$$a >/dev/null 2>&1; then \
	    python -m autograder grade $$a $(if $(WORKERS),--workers $(WORKERS)) \
	      $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(UNSANDBOXED) || failed="$$failed $$a"; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then echo "autograde failed for:$$failed"; exit 1; fi

# Feedback for every autograded assignment, past a submission nbgrader fails on; the
# summary at the end names each failed submission and why (exit status 1 then).
feedback: $(STAMP)
	python -m autograder feedback $(ASSIGNMENTS)

grades: $(STAMP)
	python -m autograder export --to grades.csv

# Instructor analytics from the gradebook, the ledger and the feedback: per assignment,
# reports/A.html (one self-contained page) and reports/A.csv, A-items.csv, A-students.csv.
report: $(STAMP)
	python -m autograder report $(ASSIGNMENTS)

# The instructor's whole job on a sample class, in a scratch course folder (demo/).
demo: $(STAMP)
	python -m autograder demo --dir demo $(UNSANDBOXED)

bench: $(STAMP)
	python -m autograder bench $(BENCH_ARGS)

clean:
	rm -rf submitted autograded feedback gradebook.db grades.csv reports demo artifacts .pytest_cache

# JupyterHub's proxy from npm, at the version hub/package-lock.json pins.
$(HUB_PROXY): hub/package.json hub/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "error: make hub needs npm (Node.js 18 or later: apt-get install npm)"; exit 1; }
	npm ci --prefix hub --no-audit --no-fund --loglevel=error
	touch $@

hub: $(STAMP) $(HUB_PROXY)
	python hub/demo.py up --prefix $(HUB_PREFIX) --port $(HUB_PORT) --students "$(HUB_STUDENTS)" \
	  --instructors "$(HUB_INSTRUCTORS)" --group $(HUB_GROUP) --proxy $(CURDIR)/$(HUB_PROXY) \
	  --node-modules $(CURDIR)/hub/node_modules

# Needs only a python3 (the standard library): it works after .venv is gone too.
hub-clean:
	$(if $(wildcard $(STAMP)),python,python3) hub/demo.py clean --prefix $(HUB_PREFIX) \
	  $(if $(filter 1 yes true,$(HUB_KEEP_ENV)),--keep-env)
