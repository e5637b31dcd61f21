#!/usr/bin/env bash
# Install another vLLM release beside the pinned one, for `mtplint --vllm-python`:
#   scripts/alt_vllm.sh 0.29.0   ->   .vllm-alt/0.29.0/python
# The release goes into its own --target directory with --no-deps and runs on .venv's
# interpreter and dependencies (the probe stubs vLLM's native and GPU-only parts); the
# `python` wrapper puts it first on the path. A release whose pure-Python imports differ
# from the pinned vLLM's may need extra packages: pass them after the version.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${1:?usage: scripts/alt_vllm.sh VERSION [EXTRA_PACKAGE...]}"
shift
DEST=".vllm-alt/$VERSION"
[ -x .venv/bin/python ] || { echo "run scripts/setup.sh first" >&2; exit 2; }
if ! [ -f "$DEST/site/vllm/__init__.py" ] || ! grep -qx "$VERSION" "$DEST/VERSION" 2>/dev/null; then
  rm -rf "$DEST"
  mkdir -p "$DEST"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --target "$DEST/site" "vllm==$VERSION" "$@" \
    2> >(grep -v "^WARNING: Location" >&2)
  echo "$VERSION" > "$DEST/VERSION"
fi
# A release may import pure-Python packages the pinned vLLM does not need (0.20-0.23: gguf):
# import what the probe imports, under its shim, and add each missing module by its name.
for _ in 1 2 3 4 5; do
  # vLLM logs to stdout while it imports: only the marked line is the answer.
  missing=$(PYTHONPATH="$DEST/site" VLLM_LOGGING_LEVEL=ERROR .venv/bin/python - <<'PY' 2>/dev/null | sed -n 's/^MISSING-MODULE: //p'
from mtplint.probe import runtime_shim
try:
    runtime_shim.install((9, 0), "NVIDIA H100 80GB HBM3", 80 * 2**30)
    import vllm.config, vllm.model_executor.models  # noqa: F401
except ModuleNotFoundError as exc:
    print("MISSING-MODULE:", exc.name.split(".")[0])
PY
) || true
  [ -n "$missing" ] || break
  echo "vllm $VERSION imports $missing: installing it into $DEST/site" >&2
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --target "$DEST/site" "$missing" \
    2> >(grep -v "^WARNING: \(Location\|Target directory\)" >&2) || exit 1
done
cat > "$DEST/python" <<'WRAP'
#!/bin/sh
# vLLM from ./site first on the path, on mtplint's own interpreter and dependencies.
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHONPATH="$HERE/site${PYTHONPATH:+:$PYTHONPATH}" exec "$HERE/../../.venv/bin/python" "$@"
WRAP
chmod +x "$DEST/python"
echo "$DEST/python"
