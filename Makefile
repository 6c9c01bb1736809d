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
# server) are built once. Files go out longest first (tests/durations.json, tests/conftest.py),
# not by xdist's count of tests per file.
PYTEST_FLAGS ?= -n 3 --dist loadfile --no-loadscope-reorder
KERNEL_NAME := gpu-course
# Another PyTorch build, e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu (CPU only, no
# CUDA libraries) or .../whl/cu126 (older NVIDIA drivers): installed first, at the locked version.
TORCH_INDEX ?=
TORCH_VERSION := $(shell sed -n 's/^torch==\([^ ;]*\).*/\1/p' requirements.lock)
# Both labs start through `course lab` (course_utils/tools/lab.py), the one place their
# settings are given (jupyter/README.md), so that the conda route opens the same lab.
# `course gradebook` runs nbgrader's `alembic` (gradebook migrations) from PATH.
HERE := $(abspath .)
GRADEBOOK_ENV := PATH="$(HERE)/$(VENV)/bin:$$PATH"

.PHONY: lab instructor test install release release-check bench lock clean-venv

install: $(TEST_STAMP)

# Before pip: one clear line for a Python that is missing or too old (pip would end in a bare
# ResolutionImpossible), and a .venv made by one is rebuilt rather than kept. A name that runs
# nothing (not on PATH, or a pyenv shim for a version not installed) fails `--version`.
ASK_PYTHON = run 'make $(or $(MAKECMDGOALS),install) PYTHON=python3.12' (any Python >= $(MIN_PYTHON)).
define venv
	@version=$$($(PYTHON) --version 2>&1) || { echo "The course needs Python $(MIN_PYTHON) or \
	newer, and '$(PYTHON)' was not found: $(ASK_PYTHON)"; exit 1; }; \
	$(PYTHON) -c '$(AT_LEAST_MIN)' 2>/dev/null || { echo "The course needs Python \
	$(MIN_PYTHON) or newer, and '$(PYTHON)' is $$version: $(ASK_PYTHON)"; exit 1; }
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
	$(VENV)/bin/course lab $(LAB_FLAGS)

# Instructors: the whole course (formgrader needs the course folder inside the lab's root),
# with the gradebook migrated and the lessons registered before formgrader first opens.
instructor: $(TEST_STAMP)
	$(GRADEBOOK_ENV) $(VENV)/bin/course gradebook
	$(VENV)/bin/course lab --instructor $(LAB_FLAGS)

test: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest $(PYTEST_FLAGS)

# Each test file's seconds in one whole run, into tests/durations.json: the order in which
# `make test` hands files to its workers (longest first). Re-run when files are added.
.PHONY: test-durations
test-durations: $(TEST_STAMP)
	-$(PY) -m pytest $(PYTEST_FLAGS) -o junit_family=xunit1 --junitxml=.test-durations.xml
	$(PY) scripts/test_durations.py .test-durations.xml

# Benchmarks print measured figures (README quotes them); not part of the test suite.
bench: $(STAMP)
	@for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

# Mutation analysis of the checks (docs/mutation.md, tests/mutation/): each exercise's model
# answer changed one construct at a time, and its right alternatives, run through its check.
# Fails when a figure falls below tests/mutation/baseline.json or a variant newly survives;
# otherwise records the figures there and rewrites docs/mutation.md. MUTATION_FLAGS=--slow adds
# the DDP script (torchrun on every variant); --exercise lessonNN/<id> runs one exercise.
MUTATION_FLAGS ?=
.PHONY: mutation
mutation: $(TEST_STAMP)
	$(PY) -m tests.mutation --check --write $(MUTATION_FLAGS)

# ---- The mutation analysis's in-process verdicts against `course grade`'s (sandboxed): 3 answers
# per exercise of 7 fast exercises (2 variants the check kills, 1 right answer), each a copy of
# the lesson's solution notebook with it in place of the solution cell, graded in one
# `course grade --jobs 2` run with the seed the in-process runs use (tests/mutation/graded.py).
# Fails on any disagreement. Not part of `make test`: about a minute.
.PHONY: test-mutation-grade
test-mutation-grade: $(TEST_STAMP)
	$(PY) -m tests.mutation --through-grade 3

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

# ---- docs/cluster.md's route on a real single-node Slurm (tests/test_cluster.py): not part of
# `make test` (3 to 5 minutes). Needs root and Debian's slurm-wlm and munge
# (apt-get install -y slurm-wlm munge) and PostgreSQL's server (initdb, pg_ctl).
.PHONY: test-cluster
test-cluster: $(TEST_STAMP)
	COURSE_CLUSTER_TEST=1 $(PY) -m pytest -n 0 tests/test_cluster.py tests/test_browser_cluster.py

# ---- A lesson on Colab, simulated (tests/test_colab_lesson.py): not part of `make test`,
# because the lesson's first cell installs NumPy, scikit-learn, matplotlib and tqdm from the
# package index, as it does on a real runtime.
.PHONY: test-colab
test-colab: $(TEST_STAMP)
	COURSE_COLAB_SIMULATION=1 $(PY) -m pytest -n 0 tests/test_colab_lesson.py

# ---- Hostile submissions aimed at the grading worker (tests/test_grading_hostile.py): two
# classes of real kernels, about a minute of CPU, so not part of `make test`.
.PHONY: test-hostile
test-hostile: $(TEST_STAMP)
	COURSE_HOSTILE=1 $(PY) -m pytest -n 0 -s tests/test_grading_hostile.py

# ---- Grading that skips cells, checked against grading that runs them all (docs/grading.md):
# the suite's class graded a second time with --execute all, every score compared. Not part of
# `make test`: the full run takes about as long as the rest of tests/test_grading.py.
.PHONY: test-execute-all
test-execute-all: $(TEST_STAMP)
	COURSE_TEST_EXECUTE_ALL=1 $(PY) -m pytest -n 0 tests/test_grading.py

# ---- The build every Linux learner without a GPU installs (docs/pytorch-versions.md) ----
# PyPI's torch wheel for Linux is the CUDA build; on a machine with no NVIDIA driver it must work
# as well as the CPU-only build. A pip configuration may prefer a CPU-only wheel of the same
# version (find-links, another index): this venv asks PyPI alone, then checks what it got.
CUDA_VENV := .venv-cuda
PYPI_INDEX ?= https://pypi.org/simple
.PHONY: test-cuda-build
$(CUDA_VENV)/.installed: pyproject.toml requirements.lock
	@test -x $(CUDA_VENV)/bin/python || $(PYTHON) -m venv $(CUDA_VENV)
	env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null $(CUDA_VENV)/bin/python -m pip install \
		--quiet --disable-pip-version-check --index-url $(PYPI_INDEX) torch==$(TORCH_VERSION)
	$(CUDA_VENV)/bin/python -c "import torch, sys; sys.exit(None if torch.version.cuda else \
		f'expected PyPI CUDA build of torch, got {torch.__version__} (CPU-only)')"
	$(CUDA_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --constraint requirements.lock --editable '.[test,postgres]'
	$(CUDA_VENV)/bin/python -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "Python (GPU course)" >/dev/null
	@touch $@

test-cuda-build: $(CUDA_VENV)/.installed
	$(CUDA_VENV)/bin/python -m pytest $(PYTEST_FLAGS)

# ---- The tested PyTorch range (pyproject.toml: torch>=2.11,<2.16; docs/pytorch-versions.md) ----
# `make test` covers the locked version; this covers the oldest supported and the newest release:
# for each, a venv with that torch (from VERSIONS_INDEX alone) and the locked rest, then the unit
# tests (warnings are errors, pyproject.toml) and every lesson under nbval (a cell that writes to
# stderr fails, solutions/conftest.py). Left out, each for the reason docs/pytorch-versions.md
# gives (tests/test_workflow.py holds the two lists together): the browser and the whole-class
# grading runs. One version: make test-torch TORCH=2.11.0.
TESTED_TORCH ?= 2.11.0 2.15.0
VERSIONS_INDEX ?= $(PYPI_INDEX)
VERSIONS_LEFT_OUT := \
	--ignore=tests/test_browser.py \
	--ignore=tests/test_browser_validate.py \
	--ignore=tests/test_grading.py \
	--ignore=tests/test_grading_resilience.py \
	--ignore=tests/test_exchange.py \
	--deselect=tests/test_cli.py::test_grade_prints_a_row_per_submission \
	--deselect=tests/test_gradebook_postgres.py::test_two_shards_graded_at_once_equal_one_sqlite_run \
	--deselect=tests/test_gpu_check.py::test_wheels_folder_holds_no_torch \
	--deselect=tests/test_gpu_check.py::test_check_reports_no_gpu_and_exits_0 \
	--deselect=tests/test_gpu_check.py::test_check_uses_the_machines_torch_in_place
VERSIONS_TESTS ?= tests solutions $(VERSIONS_LEFT_OUT)
.PHONY: test-versions test-torch
test-versions:
	@for version in $(TESTED_TORCH); do $(MAKE) --no-print-directory test-torch TORCH=$$version || exit 1; done

# Both installs keep the machine's pip configuration out: a find-links folder or a global
# constraint there (this project's VM caps torch at 2.14.1) would refuse or swap the version asked for
VERSIONS_PIP = env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
	.venv-torch-$(TORCH)/bin/python -m pip install --quiet --disable-pip-version-check \
	--index-url $(VERSIONS_INDEX)
test-torch:
	@test -n "$(TORCH)" || { echo "make test-torch TORCH=<version>, e.g. TORCH=2.11.0"; exit 2; }
	test -x .venv-torch-$(TORCH)/bin/python || $(PYTHON) -m venv .venv-torch-$(TORCH)
	$(VERSIONS_PIP) torch==$(TORCH)
	@# torch and what torch alone pins (its CUDA libraries, triton; setuptools, which torch 2.11
	@# caps below 82) follow the version asked for; torch itself stays the one asked for, or pip
	@# would quietly swap in another version that fits the rest
	grep -v -E '^(torch|triton|nvidia-|cuda-|setuptools)' requirements.lock > .venv-torch-$(TORCH)/constraints.txt
	echo 'torch==$(TORCH)' >> .venv-torch-$(TORCH)/constraints.txt
	$(VERSIONS_PIP) --constraint .venv-torch-$(TORCH)/constraints.txt --editable '.[test,postgres]'
	.venv-torch-$(TORCH)/bin/python -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "Python (GPU course)" >/dev/null
	.venv-torch-$(TORCH)/bin/python -c "import torch, sys; v = torch.__version__.split('+')[0]; \
		sys.exit(None if v == '$(TORCH)' else f'asked for torch $(TORCH), got {v}')"
	.venv-torch-$(TORCH)/bin/python -m pytest $(PYTEST_FLAGS) $(VERSIONS_TESTS)

# ---- Verifying the course on a GPU machine (docs/gpu-check.md) ----
# gpu-wheels, on a networked machine: the wheels the check installs beside the GPU machine's own
# PyTorch, for its Python (3.12 on the H100 machines the course is verified on).
# gpu-check, on the GPU machine (no network needed): GPU_PYTHON is the Python holding its PyTorch.
# Some lessons, in this order, each skipped when its published run is fresh: LESSONS="08 01";
# within a time: DEADLINE_S=300 (no lesson is started that its last run's time would overrun);
# AGAIN=04 runs lesson 04 even if fresh (AGAIN=all: every lesson).
# mark-stale, anywhere: marks each published run whose lesson changed since (docs/gpu-check.md).
GPU_WHEELS ?= wheels
GPU_PYTHON ?= python3
GPU_PYTHON_VERSION ?= 3.12
LESSONS ?=
DEADLINE_S ?=
AGAIN ?=
.PHONY: gpu-wheels gpu-check mark-stale
gpu-wheels:
	$(PYTHON) scripts/gpu_check.py wheels --dest $(GPU_WHEELS) --python-version $(GPU_PYTHON_VERSION)

gpu-check:
	$(GPU_PYTHON) scripts/gpu_check.py check --wheels $(GPU_WHEELS) \
		$(if $(LESSONS),--lessons $(LESSONS)) $(if $(DEADLINE_S),--deadline-s $(DEADLINE_S)) \
		$(if $(AGAIN),--again $(filter-out all,$(AGAIN)))

mark-stale:
	$(PYTHON) scripts/gpu_check.py mark-stale
