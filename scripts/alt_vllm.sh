#!/usr/bin/env bash
# Legacy entry point: provision another vLLM release for `mtplint --vllm-python` and print its
# interpreter. `mtplint PATH --vllm-commit VERSION` does this itself on first use, and
# `mtplint env add VERSION` ahead of time (lint/envs/; `mtplint env list` shows the store).
#   scripts/alt_vllm.sh 0.29.0 [EXTRA_PACKAGE...]   ->   ~/.cache/mtplint/envs/0.29.0/python
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${1:?usage: scripts/alt_vllm.sh VERSION [EXTRA_PACKAGE...]}"
shift
[ -x .venv/bin/mtplint ] || { echo "run scripts/setup.sh first" >&2; exit 2; }
extra=()
for pkg in "$@"; do extra+=(--with "$pkg"); done
exec .venv/bin/mtplint env add "$VERSION" --print-python "${extra[@]}"
