# The README's two commands: `make site` (set up and build the site) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: site serve test setup-site setup-test browser-deps node-deps clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

setup-site: $(BIN)/python
	$(BIN)/pip install -q -e .

site: setup-site node-deps
	$(BIN)/python build.py

serve: setup-site
	$(BIN)/python build.py serve

# npm's packages (package.json, pinned by package-lock.json): axe-core for the browser tests, and
# Pyodide, the Python runtime the study pages' "Run the check here" serves (docs/bundles.md).
# Installed again whenever the lock file changes.
node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund --silent

# `make site` installs them where npm is available; without npm the site still builds, without
# the button, and the build says why.
node-deps:
	@if command -v npm >/dev/null; then $(MAKE) -s --no-print-directory node_modules/.package-lock.json; \
	else echo "npm not found: the study pages are built without \"Run the check here\" (install npm, then make site)"; fi

# torch first, pinned: a bare range could pull a multi-GB CUDA build.
setup-test: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[measure,test,scale]'

# Debian's Chromium for the browser suite, Java for the Nu HTML checker, unzip for the study pages'
# command (tests/bundles run it as printed), ssh-keygen (openssh-client) to verify and sign
# reproduction records, and npm's packages (axe-core, Pyodide).
browser-deps:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver)
	@command -v java >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless)
	@command -v unzip >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip)
	@command -v ssh-keygen >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-client)
	@$(MAKE) -s --no-print-directory node_modules/.package-lock.json

test: setup-test browser-deps
	$(BIN)/python -m pytest

clean:
	rm -rf public .cache
