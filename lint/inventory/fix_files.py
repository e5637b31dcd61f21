"""The names `mtplint fix` gives the files it makes in a checkpoint while it works: its lock and
its temp files. A fix removes them when it ends; a killed one leaves them, and the next fix
removes them under its lock. They are named here, below the fixer, so the inventory can list
what an upload would otherwise carry (MTP022)."""

from __future__ import annotations

LOCK_NAME = ".mtplint-fix.lock"
TEMP_SUFFIX = ".mtplint-tmp"  # every temp file a fix makes: ".<name>.<random>[.rollback].mtplint-tmp"


def is_fix_leftover(name: str) -> bool:
    return name == LOCK_NAME or (name.startswith(".") and name.endswith(TEMP_SUFFIX))
