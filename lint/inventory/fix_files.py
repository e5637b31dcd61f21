"""The names `mtplint fix` gives the files it makes in a checkpoint while it works: its lock and
its temp files. A fix removes them when it ends; a killed one leaves them, and the next fix
removes them under its lock. They are named here, below the fixer, so the inventory can list
what an upload would otherwise carry (MTP022)."""

from __future__ import annotations

import os
from pathlib import Path

LOCK_NAME = ".mtplint-fix.lock"
TEMP_SUFFIX = ".mtplint-tmp"  # every temp file a fix makes: ".<name>.<random>[.rollback].mtplint-tmp"


def is_fix_leftover(name: str) -> bool:
    return name == LOCK_NAME or (name.startswith(".") and name.endswith(TEMP_SUFFIX))


# Checkpoint directories whose fix lock this process holds: the fix removed every leftover
# when it took the lock, so the lock and temp files there now are its own work in progress,
# gone when it ends, not an interrupted fix's (its own lints must not report them as MTP022).
_held: set[str] = set()


def hold(root: Path) -> None:
    _held.add(os.path.realpath(root))


def release(root: Path) -> None:
    _held.discard(os.path.realpath(root))


def held_here(root: Path) -> bool:
    return os.path.realpath(root) in _held
