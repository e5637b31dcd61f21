"""On-disk cache of probe reports, so a repeated lint of the same inputs skips vLLM.

An entry is sealed (cache_dirs.write_entry: an HMAC with this user's secret over the entry's
name and bytes) gzip of one JSON header line and the report. The header names the entry's key,
the schema version, the sha256 of the report bytes that follow and the inputs the key was
computed from. The report is the JSON value ProbeReport.to_json() gives, in marshal (a large
report decodes ~5x faster than from JSON text, and only sealed bytes are ever decoded). A read
recomputes those inputs from the lint at hand and compares them.
Anything that does not verify, in seal, inputs, content or shape (ProbeReport.from_json), is a
miss and is removed: a cache entry must never decide a lint's outcome, only save the probe's time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import marshal
import zlib
from pathlib import Path
from typing import Any

from ..core.cache_dirs import cache_root, read_entry, write_entry
from .report import SCHEMA_VERSION, ProbeReport

_FORMAT = "mtplint-probe-cache"


class _Invalid(ValueError):
    pass


def cache_dir() -> Path:
    return cache_root() / "probe"


def key_of(inputs: dict[str, Any]) -> str:
    """The entry's name for these inputs (what runner.cache_inputs computed)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def entry_path(key: str) -> Path:
    return cache_dir() / f"{key}.json.gz"


def encode(inputs: dict[str, Any], report: ProbeReport) -> bytes:
    return envelope(inputs, report.to_json())


def envelope(inputs: dict[str, Any], payload_json: Any) -> bytes:
    """An entry for `inputs` around any JSON value (encode() puts a report in it)."""
    # Key order is kept (marshal keeps it): checks iterate these dicts, and a hit must lint as the probe did.
    payload = marshal.dumps(payload_json)
    header = {
        "format": _FORMAT,
        "key": key_of(inputs),
        "schema": SCHEMA_VERSION,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "inputs": inputs,
    }
    return gzip.compress(json.dumps(header, sort_keys=True).encode() + b"\n" + payload, compresslevel=1)


def decode(inputs: dict[str, Any], blob: bytes) -> ProbeReport:
    """The report in an entry written by encode() for `inputs`; _Invalid (a ValueError) otherwise."""
    raw = gzip.decompress(blob)
    head, sep, payload = raw.partition(b"\n")
    if not sep:
        raise _Invalid("no header line")
    header = json.loads(head)
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise _Invalid("not a probe cache entry")
    if header.get("key") != key_of(inputs) or header.get("inputs") != json.loads(json.dumps(inputs)):
        raise _Invalid("entry of other inputs")
    if header.get("schema") != SCHEMA_VERSION:
        raise _Invalid(f"schema {header.get('schema')!r:.20}")
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise _Invalid("checksum mismatch")
    report = ProbeReport.from_json(marshal.loads(payload))  # ValueError naming the bad field
    vllm = inputs.get("vllm") or [None, None]
    if [report.vllm.version, report.vllm.commit] != list(vllm[:2]):
        raise _Invalid("report of another vLLM")
    return report


def load(inputs: dict[str, Any]) -> ProbeReport | None:
    path = entry_path(key_of(inputs))
    blob = read_entry(path)
    if blob is None:
        return None  # absent, unreadable or not sealed by this user: probe again
    try:
        return decode(inputs, blob)
    except (OSError, EOFError, ValueError, TypeError, RecursionError, zlib.error):
        path.unlink(missing_ok=True)
        return None


def store(inputs: dict[str, Any], report: ProbeReport) -> None:
    try:
        data = encode(inputs, report)
    except (TypeError, ValueError):
        return
    write_entry(entry_path(key_of(inputs)), data)
