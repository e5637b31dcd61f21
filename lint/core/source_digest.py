"""One digest of source files for every cache whose entries a code change must invalidate (the
probe cache, the probe workers, the remembered verdicts): each names the folders it depends on."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path


@functools.cache
def tree_digest(root: Path, under: tuple[str, ...] = (".",), pattern: str = "*.py") -> str:
    """sha256 over the relative name and bytes of every file matching `pattern` below each of
    `under` (folders of `root`), in a fixed order: a renamed, added or edited file changes it."""
    h = hashlib.sha256()
    for sub in under:
        for p in sorted((root / sub).rglob(pattern)):
            if "__pycache__" in p.parts:
                continue
            h.update(os.fsencode(p.relative_to(root)) + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()
