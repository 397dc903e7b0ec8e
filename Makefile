# The README's two commands: `make site` (set up and build the site) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: site serve test setup-site setup-test browser-deps clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

setup-site: $(BIN)/python
	$(BIN)/pip install -q -e .

site: setup-site
	$(BIN)/python build.py

serve: setup-site
	$(BIN)/python build.py serve

# torch first, pinned: a bare range could pull a multi-GB CUDA build.
setup-test: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[measure,test,scale]'

# Debian's Chromium for the browser suite, Java for the Nu HTML checker, unzip for the study pages'
# command (tests/bundles run it as printed), ssh-keygen (openssh-client) to verify and sign
# reproduction records, and axe-core from npm.
browser-deps:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver)
	@command -v java >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless)
	@command -v unzip >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip)
	@command -v ssh-keygen >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-client)
	@[ -d node_modules/axe-core ] || npm ci --no-audit --no-fund --silent

test: setup-test browser-deps
	$(BIN)/python -m pytest

clean:
	rm -rf public .cache
