# The two commands a learner and a CI maintainer need:
#   make lab    set up .venv (first time only) and open JupyterLab on notebooks/
#   make test   set up .venv (first time only) and run the whole test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LAB_FLAGS ?=
# Two workers (this course's CI machine has 2 cores); one test file per worker at a time, so
# that a file's module-scoped fixtures (a graded class, a started server) are built once.
PYTEST_FLAGS ?= -n 2 --dist loadfile
KERNEL_NAME := gpu-course
# Another PyTorch build, e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu (CPU only, no
# CUDA libraries) or .../whl/cu126 (older NVIDIA drivers): installed first, at the locked version.
TORCH_INDEX ?=
TORCH_VERSION := $(shell sed -n 's/^torch==\([^ ;]*\).*/\1/p' requirements.lock)
# Jupyter refuses to run as root (containers, CI) unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: lab test install release release-check bench lock clean-venv

install: $(STAMP)

# Reinstall only when the dependency declarations change.
$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_INDEX),$(PY) -m pip install --quiet --disable-pip-version-check torch==$(TORCH_VERSION) --index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet --disable-pip-version-check --constraint requirements.lock --editable '.[test,postgres]'
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "Python (GPU course)" >/dev/null
	@touch $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(ROOT_FLAG) $(LAB_FLAGS)

test: $(STAMP)
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
