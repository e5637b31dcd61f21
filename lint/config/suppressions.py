"""Per-finding suppressions: `[[suppress]]` tables in the project's settings file, and a
baseline file (lint/pipeline/baseline.py), applied to a run's findings before they are reported
(lint/pipeline/policy.py). This module reads and validates the tables.

    [[suppress]]                      # [[tool.mtplint.suppress]] in pyproject.toml
    id = "MTP001:re:.*mtp.*"          # the finding's id, as in the JSON report
    reason = "vLLM 0.34 matches this entry; see #123"

    [[suppress]]
    code = "MTP005"
    location = "model.layers.43.*"    # glob over the file, tensor, config key or key
    path = "checkpoints/dsv4-*"       # optional: only for these checkpoint directories
    reason = "the draft's shared experts load from the target"

Suppressions are read from the project configuration only (settings.py refuses them in a
checkpoint's own mtplint.toml): a checkpoint must never be able to hide its own findings.
A suppressed finding is still reported, as suppressed, with its reason; it never counts for
the exit code. A suppression that matches nothing is reported as unused (like Ruff's RUF100),
on a channel of its own: it is a fact about the project's configuration, not the checkpoint,
so it never fails a lint nor mixes with the checkpoint's findings.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.findings import Finding
from ..core.regular_files import read_capped_text

_KEYS = ("id", "code", "location", "path", "reason")
_CODE = re.compile(r"[A-Z]{2,}[0-9]{3,}")
_HEADER = re.compile(r"^\s*\[\[\s*(?:tool\s*\.\s*mtplint\s*\.\s*)?suppress\s*\]\]")


@dataclass(frozen=True)
class Suppression:
    reason: str
    source: str  # the settings file as settings.py labels it, e.g. "./mtplint.toml"
    entry: int  # 1-based among the file's [[suppress]] tables
    line: int | None = None  # of the entry's [[suppress]] header, when it has one
    id: str | None = None
    code: str | None = None
    location: str | None = None
    path: str | None = None

    @property
    def rule(self) -> str:
        return self.code or (self.id or "").split(":", 1)[0]

    def where(self) -> str:
        return f"{self.source.split(' [', 1)[0]}:{self.line}" if self.line else f"{self.source}"

    def describe(self) -> str:
        if self.id is not None:
            what = f"id = {_quoted(self.id)}"
        else:
            what = f"code = {_quoted(self.code or '')}, location = {_quoted(self.location or '')}"
        return what + (f", path = {_quoted(self.path)}" if self.path else "")

    def applies_to(self, checkpoint: str) -> bool:
        return self.path is None or _path_matches(self.path, checkpoint)

    def matches(self, f: Finding) -> bool:
        if self.id is not None:
            return f.id == self.id
        if f.code != self.code or self.location is None:
            return False
        loc = f.location
        names = (loc.file, loc.tensor, loc.config_key, f.key, f"{loc.file}:{loc.tensor or loc.config_key}")
        return any(n and fnmatchcase(n, self.location) for n in names)

    def to_dict(self) -> dict[str, Any]:
        out = {"source": self.source, "entry": self.entry, "line": self.line, "reason": self.reason}
        for key in ("id", "code", "location", "path"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _path_matches(pattern: str, checkpoint: str) -> bool:
    # The pattern may be written relative to the project directory or absolute; the checkpoint
    # may be given either way too.
    pattern = os.path.normpath(pattern)
    names = {os.path.normpath(checkpoint)}
    try:
        absolute = Path(checkpoint).resolve()
        names |= {str(absolute), os.path.relpath(absolute, Path.cwd().resolve())}
    except (OSError, RuntimeError, ValueError):
        pass
    return any(fnmatchcase(name, pattern) for name in names)


def rule_codes() -> set[str]:
    """Codes of the shipped rules, from their file names (no rule file is parsed)."""
    return {p.name[:-5] for p in resources.files("mtplint.ruledata").iterdir() if _CODE.fullmatch(p.name[:-5])}


def parse_suppressions(value: Any, where: str) -> tuple[Suppression, ...]:
    """The [[suppress]] tables of one settings file; BadInput naming the file, the entry
    (and its line where the file has a [[suppress]] header for it) and what is wrong."""
    if not isinstance(value, list):
        raise BadInput(
            "suppress must be an array of tables ([[suppress]] with id or code + location, and reason)", path=where
        )
    lines = _header_lines(where, len(value))
    known = rule_codes()
    return tuple(_entry(item, where, i, lines[i - 1], known) for i, item in enumerate(value, 1))


def _entry(item: Any, where: str, n: int, line: int | None, known: set[str]) -> Suppression:
    why = _shape_problem(item) or _target_problem(item, known)
    if why:
        raise BadInput(f"[[suppress]] entry {n}: {why}", path=f"{where.split(' [', 1)[0]}:{line}" if line else where)
    fields = {k: item[k] for k in ("id", "code", "location", "path") if k in item}
    if "code" in fields:
        fields["code"] = fields["code"].strip().upper()
    return Suppression(reason=item["reason"].strip(), source=where, entry=n, line=line, **fields)


def _shape_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return "must be a table with id or code + location, and reason"
    unknown = sorted(k for k in item if k not in _KEYS)
    if unknown:
        return f"unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(_KEYS)}"
    wrong = next((k for k, v in item.items() if not isinstance(v, str)), None)
    if wrong:
        return f"{wrong} must be a string, not {item[wrong]!r:.60}"
    if not item.get("reason", "").strip():
        return "reason is required: say why this finding is accepted"
    return None


def _target_problem(item: dict[str, str], known: set[str]) -> str | None:
    if ("id" in item) == ("code" in item):
        return 'give either id = "CODE:KEY" (a finding\'s id in the JSON report) or code + location'
    if "id" in item:
        rule = item["id"].split(":", 1)[0]
        if ":" not in item["id"] or not _CODE.fullmatch(rule):
            return f'id must be a finding id "CODE:KEY" as in the JSON report, not {item["id"]!r:.80}'
        if "location" in item:
            return "location goes with code, not with id (an id names one finding already)"
    else:
        rule = item["code"].strip().upper()
        if not item.get("location"):
            return "code needs a location (a glob over the file, tensor, config key or key); to skip a rule use ignore"
    return None if rule in known else f"unknown rule code {rule}; see `mtplint rules`"


SETTINGS_MAX_BYTES = 1 << 20  # as settings.py reads the file the first time


def _header_lines(where: str, count: int) -> list[int | None]:
    """Line of each entry's [[suppress]] header; all None when the entries cannot be told
    apart by their headers (an inline array, or a file that cannot be read again)."""
    try:
        text = read_capped_text(Path(where.split(" [", 1)[0]), SETTINGS_MAX_BYTES)
    except (OSError, UnicodeDecodeError):
        return [None] * count
    found = [i for i, ln in enumerate(text.splitlines(), 1) if _HEADER.match(ln)]
    return list(found) if len(found) == count else [None] * count
