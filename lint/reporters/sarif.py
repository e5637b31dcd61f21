"""SARIF 2.1.0 for GitHub code scanning (subset GitHub reads: linter-conventions.md 2.1)."""

from __future__ import annotations

import hashlib
import json
import posixpath
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..core.findings import Finding, RunResult, Suppressed
from ..core.textsafe import json_safe, terminal_safe
from ..core.versions import __version__
from ..engine.rule import rule_doc_uri
from .common import checkpoint_name, consequence_tree, fix_commands, jsonable
from .lines import SourceLines

if TYPE_CHECKING:
    from ..engine.rule import Rule

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/mtplint/mtplint"
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
    lines = SourceLines(result.inputs.path)
    by_id = {f.id: f for f in result.findings}
    _, children = consequence_tree(result.findings)
    locate = partial(_location, lines=lines, uri_prefix=uri_prefix, uri_base_id=uri_base_id)
    results = [_result(f, index[f.code], locate, by_id, children, checkpoint_name(result)) for f in result.findings]
    # Accepted findings stay visible to code scanning, marked suppressed with the project's reason.
    for s in result.suppressed:
        res = _result(s.finding, index[s.finding.code], locate, by_id, children, checkpoint_name(result))
        results.append({**res, "suppressions": [suppression_object(s)]})
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
        "automationDetails": {"id": automation_id(result)},
        "columnKind": "unicodeCodePoints",
        **({"invocations": [unused_suppressions_invocation(result)]} if result.unused_suppressions else {}),
        "properties": _plain({"vllm": result.vllm.to_json(), "inputs": result.inputs.to_json()}),
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _descriptors(result: RunResult, rules: dict[str, Rule]) -> tuple[list[dict], dict[str, int]]:
    # Every evaluated rule gets a descriptor (GitHub shows help for all), plus any rule that fired
    # without being listed, so every ruleIndex resolves.
    entries = {r["code"]: r for r in result.rules_evaluated}
    for f in [*result.findings, *(s.finding for s in result.suppressed)]:
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
        markdown, help_uri = text, rule_doc_uri(code)
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
    related: list[dict] = []
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


def automation_id(result: RunResult, checkpoint: str | None = None) -> str:
    """`mtplint/gpu=h100/tp=1/n=1/vllm=0.33.0/`: one code-scanning category per matrix cell.
    The trailing slash makes the whole id the category (SARIF 3.17.4), so runs on other GPUs,
    TP sizes or vLLM releases keep their own alerts instead of closing each other's.
    checkpoint: several checkpoints in one log (`mtplint check A B`) each get a `ckpt=` part,
    since code scanning refuses a file with two runs of one tool in one category."""
    inputs = result.inputs
    parts = [
        ("ckpt", checkpoint),
        ("gpu", inputs.gpu),
        ("tp", inputs.tensor_parallel_size),
        ("pp", inputs.pipeline_parallel_size if (inputs.pipeline_parallel_size or 1) > 1 else None),
        ("n", inputs.num_speculative_tokens),
        ("vllm", result.vllm.version),
    ]
    # A value is one path segment: a slash or space in it would move the category boundary.
    shown = [f"{k}={str(v).replace('/', '_').replace(' ', '_')}" for k, v in parts if v is not None]
    return "/".join(["mtplint", *shown]) + "/"


def _location(f: Finding, lines: SourceLines, uri_prefix: str, uri_base_id: str) -> dict:
    loc = f.location
    file, line = lines.locate(f)
    uri = posixpath.join(uri_prefix.strip("/"), file) if uri_prefix.strip("/") else file
    out: dict[str, Any] = {
        "physicalLocation": {
            "artifactLocation": {"uri": quote(uri, safe="/", errors="surrogatepass"), "uriBaseId": uri_base_id},
            # A shard is binary: its findings anchor on line 1 (GitHub needs a line).
            "region": {"startLine": line or 1},
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


def suppression_object(s: Suppressed) -> dict:
    # "external": the suppression lives outside the scanned file (the project's settings or the baseline).
    return {
        "kind": "external",
        "status": "accepted",
        "justification": terminal_safe(s.reason),
        "properties": {"source": s.source, "via": s.kind},
    }


def unused_suppressions_invocation(result: RunResult) -> dict:
    """[[suppress]] entries that matched nothing are about the configuration, not the
    checkpoint: tool configuration notifications, not results."""
    notes = [
        {
            "level": "warning",
            "descriptor": {"id": "unused-suppression"},
            "message": {"text": terminal_safe(u["message"])},
        }
        for u in result.unused_suppressions
    ]
    return {"executionSuccessful": True, "toolConfigurationNotifications": notes}


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 3] + "..."


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=jsonable))
