# Two entry points for a fresh machine with Python 3.11: `make demo` (the main job on the
# embedded default) and `make test`. Both create and reuse the virtual environment .venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dataset,test]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/python scripts/demo.py

test: install
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build out
