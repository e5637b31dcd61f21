"""SARIF 2.1.0 for GitHub code scanning (subset GitHub reads: linter-conventions.md 2.1)."""

from __future__ import annotations

import hashlib
import json
import posixpath
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mtplint import __version__
from mtplint.findings import Finding, RunResult
from mtplint.reporters import checkpoint_name, consequence_tree, fix_commands, jsonable
from mtplint.textsafe import json_safe, terminal_safe

if TYPE_CHECKING:
    from mtplint.engine.rule import Rule

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://mtplint.dev"
FINGERPRINT_KEY = "mtplint/v1"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_PROBLEM_SEVERITY = {"error": "error", "warning": "warning", "info": "recommendation"}
_MAX_DESCRIPTION = 1024  # GitHub's limit for short/fullDescription


def render_sarif(
    result: RunResult,
    rules: dict[str, Rule] | None = None,
    *,
    uri_prefix: str = "",
    uri_base_id: str = "%SRCROOT%",
) -> str:
    """uri_prefix: the checkpoint root relative to the uri_base_id root (usually the repository root)."""
    doc = build_sarif(result, rules or {}, uri_prefix=uri_prefix, uri_base_id=uri_base_id)
    return json_safe(json.dumps(doc, indent=2)) + "\n"


def build_sarif(
    result: RunResult, rules: dict[str, Rule], *, uri_prefix: str = "", uri_base_id: str = "%SRCROOT%"
) -> dict:
    descriptors, index = _descriptors(result, rules)
    lines = _LineFinder(result.inputs.get("path") if result.inputs else None)
    by_id = {f.id: f for f in result.findings}
    _, children = consequence_tree(result.findings)
    locate = partial(_location, lines=lines, uri_prefix=uri_prefix, uri_base_id=uri_base_id)
    results = [_result(f, index[f.code], locate, by_id, children, checkpoint_name(result)) for f in result.findings]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "mtplint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": descriptors,
            }
        },
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": _plain({"vllm": result.vllm or {}, "inputs": result.inputs or {}}),
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _descriptors(result: RunResult, rules: dict[str, Rule]) -> tuple[list[dict], dict[str, int]]:
    # Every evaluated rule gets a descriptor (GitHub shows help for all), plus any rule that fired
    # without being listed, so every ruleIndex resolves.
    entries = {r["code"]: r for r in result.rules_evaluated}
    for f in result.findings:
        entries.setdefault(f.code, {"code": f.code, "name": f.name, "severity": f.severity, "summary": ""})
    descriptors = [_descriptor(entry, rules.get(code)) for code, entry in entries.items()]
    return descriptors, {code: i for i, code in enumerate(entries)}


def _descriptor(entry: dict, rule: Rule | None) -> dict:
    code = entry["code"]
    name = rule.name if rule else entry.get("name") or code
    severity = rule.severity if rule else entry.get("severity", "warning")
    summary = (rule.summary if rule else entry.get("summary")) or name
    if rule:
        ex = rule.explanation
        full = ex.what
        text = f"{ex.what}\n\nWhy: {ex.why}\n\nExample: {ex.example}\n\nFix: {ex.fix}"
        markdown = (
            f"{ex.what}\n\n**Why it matters.** {ex.why}\n\n**Example.** {ex.example}\n\n"
            f"**Fix.** {ex.fix}\n\nRun `mtplint rule {code}` for the full explanation."
        )
        if rule.references:
            markdown += "\n\n**References.**\n" + "\n".join(f"- <{u}>" for u in rule.references)
        help_uri = rule.help_uri
    else:
        full, text = summary, f"{summary}\n\nRun `mtplint rule {code}` for the full explanation."
        markdown, help_uri = text, f"https://mtplint.dev/rules/{code}"
    tags = ["mtp", "vllm", "speculative-decoding"]
    if rule:
        tags += [f"arch:{a}" for a in rule.applies_to.architectures]
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": _clip(summary)},
        "fullDescription": {"text": _clip(full or summary)},
        "help": {"text": text, "markdown": markdown},
        "helpUri": help_uri,
        "defaultConfiguration": {"level": _LEVEL.get(severity, "warning")},
        "properties": {
            "tags": tags,
            "precision": "high",
            "problem.severity": _PROBLEM_SEVERITY.get(severity, "warning"),
        },
    }


def _result(f: Finding, rule_index: int, locate, by_id: dict, children: dict, path: str) -> dict:
    res: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": _LEVEL.get(f.severity, "warning"),
        # Message texts are what viewers display: escaped visibly, like the text report. Names in
        # properties and logical locations stay exact (JSON escapes them).
        "message": {"text": terminal_safe(f.message.strip() or f"{f.code} {f.name}")},
        "locations": [locate(f)],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint(f)},
        "properties": _plain(
            {
                "findingId": f.id,
                "basis": f.basis,
                "evidence": f.evidence,
                "fixes": {"patches": f.fixes.patches, "artifact": f.fixes.artifact, "commands": fix_commands(f, path)},
            }
        ),
    }
    related = []
    if f.caused_by:
        res["properties"]["causedBy"] = f.caused_by
        cause = by_id.get(f.caused_by)
        if cause is not None:
            text = f"Caused by {cause.code} {cause.name}: {cause.message}"
            related.append(_related(len(related) + 1, locate(cause), text))
    consequences = children.get(f.id, [])
    if consequences:
        res["properties"]["consequences"] = [c.id for c in consequences]
        for c in consequences:
            related.append(_related(len(related) + 1, locate(c), f"Leads to {c.code} {c.name}: {c.message}"))
    if related:
        res["relatedLocations"] = related
    return res


def fingerprint(f: Finding) -> str:
    """Stable across runs and reformatting: code + key (or the location when a check sets no key)."""
    ident = f.key or "|".join(filter(None, (f.location.file, f.location.tensor, f.location.config_key)))
    # surrogatepass: a lone surrogate in a tensor name must not crash the report (and other names hash as before).
    return hashlib.sha256(f"{f.code}:{ident}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _location(f: Finding, lines: _LineFinder, uri_prefix: str, uri_base_id: str) -> dict:
    loc = f.location
    uri = posixpath.join(uri_prefix.strip("/"), loc.file) if uri_prefix.strip("/") else loc.file
    out: dict[str, Any] = {
        "physicalLocation": {
            "artifactLocation": {"uri": quote(uri, safe="/", errors="surrogatepass"), "uriBaseId": uri_base_id},
            "region": {"startLine": lines.line(loc.file, loc.tensor, loc.config_key)},
        }
    }
    logical = []
    if loc.tensor:
        logical.append({"name": loc.tensor.rsplit(".", 1)[-1], "fullyQualifiedName": loc.tensor, "kind": "member"})
    if loc.config_key:
        logical.append(
            {"name": loc.config_key.rsplit(".", 1)[-1], "fullyQualifiedName": loc.config_key, "kind": "property"}
        )
    if logical:
        out["logicalLocations"] = logical
    return out


def _related(i: int, location: dict, text: str) -> dict:
    return {"id": i, **location, "message": {"text": terminal_safe(text)}}


class _LineFinder:
    """Best-effort line of a config key or tensor name in a local JSON file; 1 when not found.

    GitHub anchors an alert on a line, and the line of the offending key is what a reviewer wants
    to see. Binary shards, remote checkpoints and unreadable files all fall back to line 1.
    """

    def __init__(self, root: str | None):
        self.root = Path(root) if root and "://" not in str(root) else None
        self._cache: dict[str, list[str]] = {}

    def line(self, file: str, tensor: str | None, config_key: str | None) -> int:
        if self.root is None or not file.endswith(".json"):
            return 1
        text = self._lines(file)
        if config_key:
            return self._key_path(text, config_key.split("."))
        if tensor:
            needle = f'"{tensor}'  # a tensor name or a module prefix of one
            return next((i for i, ln in enumerate(text, 1) if needle in ln), 1)
        return 1

    def _lines(self, file: str) -> list[str]:
        if file not in self._cache:
            try:
                self._cache[file] = (self.root / file).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self._cache[file] = []
        return self._cache[file]

    @staticmethod
    def _key_path(text: list[str], parts: list[str]) -> int:
        # Each segment is searched after the previous one: good enough for pretty-printed config.json.
        start, found = 0, 1
        for part in parts:
            hit = next((i for i in range(start, len(text)) if f'"{part}"' in text[i]), None)
            if hit is None:
                return found
            start, found = hit, hit + 1
        return found


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 3] + "..."


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=jsonable))
