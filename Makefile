# worldlab front door. `make lab` plays; `make test` is what CI runs.
PY := .venv/bin/python
STAMP := .venv/.worldlab-installed

.PHONY: lab demo test setup notebooks clean
.DEFAULT_GOAL := lab

$(STAMP): pyproject.toml ci/setup.sh
	bash ci/setup.sh

setup: $(STAMP)

# Jupyter refuses to run as root unless told; containers and cloud boxes often are root
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# root_dir: the repository root is served (tutorials/, README.md and data/ open in the file
# browser); the quickstart opens first
lab: setup  ## JupyterLab on the repository, the quickstart notebook open
	.venv/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" notebooks/00_quickstart.ipynb $(ROOT_FLAG)

demo: setup  ## the quickstart, headless: executed copy + outputs under runs/demo/
	$(PY) ci/run_notebooks.py --only notebooks/00_quickstart.ipynb --out runs/demo --params ci/params.yaml --profile demo

# the browser checks (play, the HTML report) run last: the report is notebook 08's; without
# Chromium (setup installs it only as root) they say why and are skipped
test: setup  ## unit tests, the tutorials' stored outputs (nbval), every notebook at CI sizes, the browser checks
	$(PY) -m pytest -q tests
	$(PY) -m pytest -q --nbval tutorials/ --nbval-sanitize-with tutorials/nbval_sanitize.cfg
	$(PY) ci/run_notebooks.py --out runs/ci --params ci/params.yaml --profile ci
	$(PY) ci/browser_checks.py

clean:
	rm -rf runs/ci runs/demo
