#!/usr/bin/env bash
# Set up .venv with mtplint and the pinned vLLM its probe runs (CPU-only machine, no GPU).
# vLLM 0.33.0 pins a CUDA torch and GPU-only kernels; the probe needs none of them:
# torch 2.13.0 (CPU build), vLLM's pure-Python requirements, then vLLM with --no-deps.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else "mtplint setup needs Python >= 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# `python -m pip`, not .venv/bin/pip: a venv copied or moved keeps its scripts' old shebangs, and
# their pip would install this tree into the other venv.
PIP=".venv/bin/python -m pip --disable-pip-version-check"
if ! .venv/bin/python -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.13.0") else 1)' 2>/dev/null; then
  # The CPU build: from the default index `torch==X` is the CUDA build plus 17 nvidia wheels.
  # PyTorch's CPU index when it answers; else the default index (where a mirror or a local
  # wheel directory in pip.conf, as in this project's sandbox, serves the CPU build).
  CPU_INDEX="${MTPLINT_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
  if .venv/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=5)' "$CPU_INDEX" 2>/dev/null; then
    $PIP install -q torch==2.13.0 --index-url "$CPU_INDEX" --extra-index-url https://pypi.org/simple
  else
    $PIP install -q torch==2.13.0
  fi
fi
# mtplint with its probe extra (vLLM's pure-Python requirements, uv), its test tools and the
# cluster extra (Ray, for `mtplint matrix --cluster` and its test tier).
$PIP install -q -e '.[probe,test,cluster]'
if ! .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("vllm") == "0.33.0" else 1)' 2>/dev/null; then
  $PIP install -q --no-deps vllm==0.33.0
fi
# Other releases are no longer installed here: a lint or a test provisions the one it names
# on first use into the environment store (`mtplint env list`).
.venv/bin/python -c 'import mtplint, vllm; print("mtplint ready; probing vLLM", vllm.__version__)' 2>/dev/null | tail -1
