"""The release -> commit table (releases.json, from the wheels' vllm/_version.py, written by
scripts/refresh_release_table.py): resolves `--vllm-commit` without a network."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..core.errors import BadInput

# The release mtplint is tested against (scripts/setup.sh installs it beside mtplint); the one
# probed when none is named, provisioned on first use where mtplint runs without it (a tool install).
PINNED = "0.33.0"

# vLLM PR #21152 (merged 2025-07-18, first released in 0.10.0) removed V0's spec-decode workers.
V0_SPEC_DECODE_REMOVED = (0, 10, 0)

_TABLE = Path(__file__).with_name("releases.json")
_VERSION = re.compile(r"^v?(\d+\.\d+\.\d+(?:(?:rc|\.post|\.dev)\d+)?)$")
_HEX = re.compile(r"^g?([0-9a-f]{7,40})$")


@dataclass(frozen=True)
class Release:
    version: str
    commit: str | None  # short id without the leading g, as the wheel records it


@cache
def table() -> dict[str, str]:
    return json.loads(_TABLE.read_text())["releases"]


def _newer_than_all(version: str, known: dict[str, str]) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return all(Version(version) > Version(k) for k in known)
    except InvalidVersion:
        return False


def as_version(x: str) -> str | None:
    """'0.31.0' or 'v0.31.0' -> '0.31.0'; anything else -> None."""
    m = _VERSION.match(x.strip())
    return m.group(1) if m else None


def as_commit(x: str) -> str | None:
    """A commit id (7 to 40 hex digits, optionally after git describe's 'g') -> lower-case hex."""
    m = _HEX.match(x.strip().lower())
    return m.group(1) if m else None


def by_commit(commit: str) -> Release | None:
    """The release built from this commit: the wanted id and the recorded short id must
    agree on their common prefix (a full id names a release whose short id starts it)."""
    hits = [v for v, c in table().items() if c.startswith(commit) or commit.startswith(c)]
    if len(hits) > 1:
        raise BadInput(f"--vllm-commit {commit} is ambiguous: releases {', '.join(hits)}; give more digits")
    return Release(hits[0], table()[hits[0]]) if hits else None


def oldest() -> str:
    return min(table(), key=_key)


def why_unsupported(version: str) -> str | None:
    """Why a release version older than the table's oldest is not probed (None: not older)."""
    if _key(version) >= _key(oldest()):
        return None
    if _key(version) < V0_SPEC_DECODE_REMOVED:
        why = (
            "releases before 0.10.0 still carry vLLM V0's speculative-decoding workers (vllm/spec_decode/, "
            "removed by vLLM PR #21152 for 0.10.0), a drafting path mtplint's probe does not model"
        )
    else:
        why = "mtplint's probe is not tested on it (its release table starts at the first release it probes)"
    return (
        f"vLLM {version} is older than {oldest()}, the oldest release mtplint supports: {why}. "
        f"Lint with --vllm-commit {oldest()} or newer"
    )


def resolve(x: str) -> Release | None:
    """A release version (known to the table or not: a newer release may be on PyPI already)
    or a release's commit id; None when X is neither. A version older than the table's
    oldest is refused with why (BadInput)."""
    version = as_version(x)
    if version is not None:
        known = table()
        if version in known or _newer_than_all(version, known):
            return Release(version, known.get(version))
        older = why_unsupported(version)
        if older:
            raise BadInput(f"--vllm-commit {x}: {older}")
        return None  # a version between the table's releases that it does not list
    commit = as_commit(x)
    return by_commit(commit) if commit else None


def nearest(version: str) -> str | None:
    """The newest release in the table at or before VERSION (a describe-style or dev version)."""
    key = _key(version)
    older = [v for v in table() if _key(v) <= key]
    return max(older, key=_key) if older else None


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:3])
