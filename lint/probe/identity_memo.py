"""vLLM's identity (version, commit, interpreter) remembered per interpreter, so a lint does not
start a second Python (~0.1 s) only to read it again.

An entry keeps the identity and a stamp (path, size, mtime, inode) of each file it was read from:
the interpreter, vLLM's distribution metadata and its `_version.py`, and the metadata of the
libraries named beside it (transformers, compressed-tensors, torch). A read stats those files and
uses the entry only if every stamp still matches; an upgrade renames the distribution's directory
and rewrites `_version.py`, so it misses. Entries are sealed like every cache entry
(core.cache_dirs): whoever can write the cache directory cannot name another vLLM.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..core.cache_dirs import cache_root, read_entry, write_entry

_FORMAT = "mtplint-vllm-identity-v2"  # v2: the libraries' versions (transformers, ...)


def _entry(python: str) -> Path:
    return cache_root() / "identity" / f"{hashlib.sha256(os.fsencode(python)).hexdigest()}.json"


def stamp(path: str) -> list[Any] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [path, st.st_size, st.st_mtime_ns, st.st_ino]


def load(python: str) -> dict[str, Any] | None:
    """The identity remembered for `python`, or None (absent, not sealed by this user, or any
    file it was read from changed)."""
    blob = read_entry(_entry(python))
    if blob is None:
        return None
    try:
        entry = json.loads(blob)
        if entry.get("format") != _FORMAT or not entry.get("stamps"):
            return None
        for recorded in entry["stamps"]:
            if stamp(recorded[0]) != recorded:
                return None
        identity = entry["identity"]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
    return identity if isinstance(identity, dict) else None


def store(python: str, identity: dict[str, Any], sources: list[str]) -> None:
    """Remember `identity` for `python` with the stamps of `sources` (the files it was read
    from, the interpreter first); nothing when one of them cannot be stamped."""
    stamps = [stamp(p) for p in [python, *sources]]
    if any(s is None for s in stamps) or not sources:
        return
    write_entry(_entry(python), json.dumps({"format": _FORMAT, "identity": identity, "stamps": stamps}).encode())
