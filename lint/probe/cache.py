"""On-disk cache of probe reports, so a repeated lint of the same inputs skips vLLM."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def cache_root() -> Path:
    root = os.environ.get("MTPLINT_CACHE_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mtplint"


def cache_dir() -> Path:
    return cache_root() / "probe"


def load(key: str) -> dict[str, Any] | None:
    path = cache_dir() / f"{key}.json.gz"
    try:
        return json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError, EOFError):
        return None  # absent or damaged: probe again


def store(key: str, report: dict[str, Any]) -> None:
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        data = gzip.compress(json.dumps(report, separators=(",", ":")).encode(), compresslevel=1)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, d / f"{key}.json.gz")
    except OSError:
        pass  # a cache that cannot be written only costs time
