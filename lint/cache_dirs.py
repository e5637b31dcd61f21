"""Where mtplint keeps what it can recompute: probe reports, inventory memos, probe environments.

`$MTPLINT_CACHE_DIR`, else `$XDG_CACHE_HOME/mtplint`, else `~/.cache/mtplint`. Every stage
takes its own subdirectory from here, so no stage imports another for a path.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    root = os.environ.get("MTPLINT_CACHE_DIR")
    if root:
        return Path(root).absolute()  # the probe and its workers run from other directories
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mtplint"
