"""Where probe environments live and what each one records.

    $MTPLINT_ENVS_DIR, else $MTPLINT_CACHE_DIR/envs, else $XDG_CACHE_HOME/mtplint/envs
    (~/.cache/mtplint/envs):
      <release version>/ or <commit, 12 hex>/
        site/      vLLM, its own pins that differ from the interpreter's, and the modules it
                   imports without declaring them
        python     runs mtplint's interpreter with site/ first on the path
        env.json   what it holds (kind, version, commit, how and when it was made; a release's
                   own resolved pins, those installed into site/, the shared torch)
        last-used  touched on every use (`mtplint env prune --unused-days`)

A directory without env.json is an interrupted provisioning: never used, pruned.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORD = "env.json"


def root() -> Path:
    if os.environ.get("MTPLINT_ENVS_DIR"):
        # Absolute: the probe runs an environment's interpreter from another working directory.
        return Path(os.environ["MTPLINT_ENVS_DIR"]).absolute()
    from ..core.cache_dirs import cache_root

    return cache_root() / "envs"


@dataclass
class Env:
    path: Path
    record: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def python(self) -> Path:
        return self.path / "python"

    @property
    def complete(self) -> bool:
        return (
            bool(self.record)
            and self.python.is_file()
            and Path(self.record.get("base_python", "")).exists()
            and not self.unpinned
        )

    @property
    def unpinned(self) -> bool:
        """A release provisioned before releases got their own pins (lint/envs/pins.py): it
        probed on the interpreter's transformers and compressed-tensors, so it is made again."""
        return self.record.get("kind") == "release" and "pins" not in self.record

    def touch(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / "last-used").write_text(f"{time.time():.0f}\n")

    def last_used(self) -> float:
        for p in (self.path / "last-used", self.path / RECORD):
            with contextlib.suppress(OSError):
                return p.stat().st_mtime
        return 0.0


def read(path: Path) -> Env:
    try:
        record = json.loads((path / RECORD).read_text())
    except (OSError, ValueError):
        record = {}
    return Env(path, record if isinstance(record, dict) else {})


def find(name: str) -> Env | None:
    path = root() / name
    if not path.is_dir():
        return None
    env = read(path)
    return env if env.complete else None


def all_envs() -> list[Env]:
    if not root().is_dir():
        return []
    return [read(p) for p in sorted(root().iterdir()) if p.is_dir() and not p.name.startswith(".")]


def size(path: Path) -> int:
    """Bytes on disk, each inode counted once (uv hard-links files from its cache)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, f))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def remove(path: Path) -> None:
    # Renamed first so a half-removed environment is never taken for a usable one.
    trash = path.with_name(f".trash-{path.name}-{os.getpid()}")
    path.rename(trash)
    shutil.rmtree(trash, ignore_errors=True)


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """One provisioning of NAME at a time across processes (parallel lints, test workers)."""
    root().mkdir(parents=True, exist_ok=True)
    with open(root() / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
