# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv and install on first use.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export DAGSTER_HOME := $(CURDIR)/.dagster_home
export LITELLM_LOCAL_MODEL_COST_MAP := True
export ORT_DISABLE_TELEMETRY := 1
export HF_HUB_OFFLINE := 1

.PHONY: install demo test lint format serve ui materialize clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## Run the end-to-end demo; `make demo ARGS=--once` (or CI=true) exits after printing the result.
demo: install
	$(BIN)/python -m reflexio_pipelines demo $(ARGS)

## Run the whole test suite; `make test ARGS='-m "not e2e"'` runs the pure tests only (the fast loop).
test: install
	$(BIN)/python -m pytest -q $(ARGS)

## ruff's linter and formatter in check mode, and mypy on the packages typed so far (`[tool.mypy] files` in
## pyproject.toml) (what CI runs); `make format` rewrites the files instead.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

serve: install
	$(BIN)/python -m serving --host 127.0.0.1 --port 8081

ui: install
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

materialize: install
	$(BIN)/python -m reflexio_pipelines materialize

clean:
	rm -rf lake/landing lake/tables lake/state lake/indexes lake/_locks .dagster_home .demo-logs
