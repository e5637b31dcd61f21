"""On-disk cache of probe reports, so a repeated lint of the same inputs skips vLLM.

An entry is gzip of one header line and the report: the header names the entry's key, the
schema version and the sha256 of the report bytes that follow (compact JSON).
Anything that does not validate, in content or in shape (ProbeReport.from_json), is a miss
and is removed: a cache entry must never decide a lint's outcome, only save the probe's time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any

from ..cache_dirs import cache_root
from .report import SCHEMA_VERSION, ProbeReport

_FORMAT = "mtplint-probe-cache"


class _Invalid(ValueError):
    pass


def cache_dir() -> Path:
    return cache_root() / "probe"


def entry_path(key: str) -> Path:
    return cache_dir() / f"{key}.json.gz"


def encode(key: str, report: ProbeReport) -> bytes:
    return envelope(key, report.to_json())


def envelope(key: str, payload_json: Any) -> bytes:
    """An entry for `key` around any JSON value (encode() puts a report in it)."""
    # Key order is kept, not sorted: checks iterate these dicts, and a hit must lint as the probe did.
    payload = json.dumps(payload_json, separators=(",", ":")).encode()
    header = {"format": _FORMAT, "key": key, "schema": SCHEMA_VERSION, "sha256": hashlib.sha256(payload).hexdigest()}
    return gzip.compress(json.dumps(header).encode() + b"\n" + payload, compresslevel=1)


def decode(key: str, blob: bytes) -> ProbeReport:
    """The report in an entry written by encode() for `key`; _Invalid (a ValueError) otherwise."""
    raw = gzip.decompress(blob)
    head, sep, payload = raw.partition(b"\n")
    if not sep:
        raise _Invalid("no header line")
    header = json.loads(head)
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise _Invalid("not a probe cache entry")
    if header.get("key") != key:
        raise _Invalid("entry of another key")
    if header.get("schema") != SCHEMA_VERSION:
        raise _Invalid(f"schema {header.get('schema')!r:.20}")
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise _Invalid("checksum mismatch")
    return ProbeReport.from_json(json.loads(payload))  # ValueError naming the bad field


def load(key: str) -> ProbeReport | None:
    path = entry_path(key)
    try:
        with path.open("rb") as f:
            inode = os.fstat(f.fileno()).st_ino
            blob = f.read()
    except OSError:
        return None  # absent or unreadable: probe again
    try:
        return decode(key, blob)
    except (OSError, EOFError, ValueError, RecursionError, zlib.error):
        _discard(path, inode)
        return None


def _discard(path: Path, inode: int) -> None:
    # Only the file that was read: a concurrent lint may have just replaced it with a good entry.
    try:
        if os.stat(path).st_ino == inode:
            path.unlink()
    except OSError:
        pass


def store(key: str, report: ProbeReport) -> None:
    d = cache_dir()
    tmp = None
    try:
        d.mkdir(parents=True, exist_ok=True)
        data = encode(key, report)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, entry_path(key))
        tmp = None
    except OSError:
        pass  # a cache that cannot be written only costs time
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
