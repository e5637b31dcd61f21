#!/usr/bin/env bash
# Set up .venv with mtplint and the pinned vLLM its probe runs (CPU-only machine, no GPU).
# vLLM 0.33.0 pins a CUDA torch and GPU-only kernels; the probe needs none of them:
# torch 2.13.0 (CPU build), vLLM's pure-Python requirements, then vLLM with --no-deps.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "mtplint setup needs Python 3.11 (vLLM wheel + torch 2.13.0 CPU)")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=".venv/bin/pip --disable-pip-version-check"
if ! .venv/bin/python -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.13.0") else 1)' 2>/dev/null; then
  $PIP install -q torch==2.13.0
fi
if ! .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("vllm") == "0.33.0" else 1)' 2>/dev/null; then
  $PIP install -q -r requirements/vllm-probe.txt
  $PIP install -q --no-deps vllm==0.33.0
fi
$PIP install -q -e '.[test]'
# Older releases for the tests (MTPLINT_SKIP_ALT_VLLM=1 skips them, e.g. in the GitHub Action).
if [ "${MTPLINT_SKIP_ALT_VLLM:-0}" != 1 ]; then
  grep -v '^#' requirements/vllm-alt.txt | while read -r release; do
    [ -z "$release" ] || scripts/alt_vllm.sh $release > /dev/null
  done
fi
.venv/bin/python -c 'import mtplint, vllm; print("mtplint ready; probing vLLM", vllm.__version__)' 2>/dev/null | tail -1
