# The commands a learner, an instructor and a CI maintainer need:
#   make lab         set up .venv (first time only) and open JupyterLab on notebooks/
#   make instructor  the same, on the whole course, with formgrader (docs/instructor.md)
#   make test        set up .venv (first time only) and run the whole test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Learners get what the lessons need; the test tools (pytest, ruff, Playwright, psycopg) come
# with `make test` and `make instructor` only.
STAMP := $(VENV)/.installed-lab
TEST_STAMP := $(VENV)/.installed-test
MIN_PYTHON := 3.10
AT_LEAST_MIN := import sys; sys.exit(sys.version_info < (3, 10))
LAB_FLAGS ?=
# Three workers on this course's 2-core CI machine: many tests wait on servers, browsers and
# subprocesses, so two workers left the cores idle about half the time. One test file per
# worker at a time, so that a file's module-scoped fixtures (a graded class, a started
# server) are built once.
PYTEST_FLAGS ?= -n 3 --dist loadfile
KERNEL_NAME := gpu-course
# Another PyTorch build, e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu (CPU only, no
# CUDA libraries) or .../whl/cu126 (older NVIDIA drivers): installed first, at the locked version.
TORCH_INDEX ?=
TORCH_VERSION := $(shell sed -n 's/^torch==\([^ ;]*\).*/\1/p' requirements.lock)
# Jupyter refuses to run as root (containers, CI) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

# Each lab reads its own settings (jupyter/README.md) through these variables: nothing is
# written to ~/.jupyter or the environment's global configuration.
HERE := $(abspath .)
LEARNER_ENV := JUPYTER_CONFIG_PATH="$(HERE)/jupyter/learner$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))" \
	JUPYTER_PATH="$(HERE)/jupyter/share$(if $(JUPYTER_PATH),:$(JUPYTER_PATH))"
# nbgrader runs `alembic` (gradebook migrations) from PATH.
INSTRUCTOR_ENV := PATH="$(HERE)/$(VENV)/bin:$$PATH" \
	JUPYTER_CONFIG_PATH="$(HERE)/jupyter/instructor$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))" \
	JUPYTER_PATH="$(HERE)/jupyter/share$(if $(JUPYTER_PATH),:$(JUPYTER_PATH))"

.PHONY: lab instructor test install release release-check bench lock clean-venv

install: $(TEST_STAMP)

# Before pip: one clear line for a Python that is too old (pip would end in a bare
# ResolutionImpossible), and a .venv made by one is rebuilt rather than kept.
define venv
	@$(PYTHON) -c '$(AT_LEAST_MIN)' 2>/dev/null || { echo "The course needs Python \
	$(MIN_PYTHON) or newer, and '$(PYTHON)' is $$($(PYTHON) --version 2>&1 || echo missing): \
	run 'make $(or $(MAKECMDGOALS),install) PYTHON=python3.12' (any Python >= $(MIN_PYTHON))."; exit 1; }
	@if test -x $(PY) && ! $(PY) -c '$(AT_LEAST_MIN)'; then \
		echo "Rebuilding $(VENV): it was made by a Python older than $(MIN_PYTHON)."; rm -rf $(VENV); fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_INDEX),$(PY) -m pip install --quiet --disable-pip-version-check torch==$(TORCH_VERSION) --index-url $(TORCH_INDEX))
endef

# Reinstall only when the dependency declarations change.
$(STAMP): pyproject.toml requirements.lock
	$(venv)
	$(PY) -m pip install --quiet --disable-pip-version-check --constraint requirements.lock --editable .
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "Python (GPU course)" >/dev/null
	@touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check --constraint requirements.lock --editable '.[test,postgres]'
	@touch $(TEST_STAMP)

# Learners: the released notebooks, learner extensions only.
lab: $(STAMP)
	$(LEARNER_ENV) $(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(ROOT_FLAG) $(LAB_FLAGS)

# Instructors: the whole course (formgrader needs the course folder inside the lab's root),
# with the gradebook migrated and the lessons registered before formgrader first opens.
instructor: $(TEST_STAMP)
	$(INSTRUCTOR_ENV) $(VENV)/bin/course gradebook
	$(INSTRUCTOR_ENV) $(VENV)/bin/jupyter lab --ServerApp.root_dir="$(HERE)" $(ROOT_FLAG) $(LAB_FLAGS)

test: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest $(PYTEST_FLAGS)

# Benchmarks print measured figures (README quotes them); not part of the test suite.
bench: $(STAMP)
	@for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

release: $(STAMP)
	$(VENV)/bin/course release

release-check: $(STAMP)
	$(VENV)/bin/course release --check

lock:
	printf 'torch==2.13.0\n' > .lock-constraints.txt
	uv pip compile pyproject.toml --extra test --extra postgres --universal --python-version 3.10 --no-header \
		-c .lock-constraints.txt -o requirements.lock.new && rm .lock-constraints.txt
	@echo "Review requirements.lock.new, then move it over requirements.lock."

clean-venv:
	rm -rf $(VENV)
