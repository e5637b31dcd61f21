"""Load the declarative rule files shipped in rules/ (package mtplint.ruledata), validated
against the checks they name: a typo in a rule file fails here, not in a user's report."""

from __future__ import annotations

import dataclasses
import string
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Any

from ..checks import CheckSpec, load_all
from ..core.errors import MtplintError
from ..core.findings import SEVERITIES
from .rule import CLAIM_KINDS, AppliesTo, Explanation, Relations, Rule

REQUIRED = ("code", "name", "severity", "summary", "check", "message", "explanation")
KNOWN = {*REQUIRED, "references", "fixes", "options", "relations", "applies_to"}


class RuleFileError(MtplintError):
    """A shipped rule file is malformed: an mtplint bug (exit 3)."""


def parse_rule(text: str, source: str, checks: dict[str, CheckSpec] | None = None) -> Rule:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleFileError(f"rule file is not valid TOML: {exc}", path=source) from None
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise RuleFileError(f"rule file lacks {', '.join(missing)}", path=source)
    _no_unknown(data, KNOWN, "", source)
    if data["severity"] not in SEVERITIES:
        raise RuleFileError(f"unknown severity {data['severity']!r}", path=source)
    checks = load_all() if checks is None else checks
    spec = checks.get(data["check"])
    if spec is None:
        raise RuleFileError(f"names check {data['check']!r}, which does not exist", path=source)
    _validate_message(data["message"], spec, source)
    ex = data["explanation"]
    _no_unknown(ex, {"what", "why", "example", "fix"}, "explanation.", source)
    fixes = data.get("fixes", {})
    _no_unknown(fixes, {"patches", "artifact"}, "fixes.", source)
    _validate_check_fixes(spec, data["check"], list(fixes.get("artifact", [])), source)
    return Rule(
        code=data["code"],
        name=data["name"],
        severity=data["severity"],
        summary=data["summary"],
        explanation=Explanation(
            what=ex.get("what", ""), why=ex.get("why", ""), example=ex.get("example", ""), fix=ex.get("fix", "")
        ),
        check=data["check"],
        options=_options(spec, data.get("options", {}), source),
        message=data["message"],
        references=list(data.get("references", [])),
        fixes={"patches": list(fixes.get("patches", [])), "artifact": list(fixes.get("artifact", []))},
        relations=_typed(Relations, data.get("relations", {}), "relations", source),
        applies_to=_typed(AppliesTo, data.get("applies_to", {}), "applies_to", source),
        source_file=source,
    )


def _validate_check_fixes(spec: CheckSpec, name: str, declared: list[str], source: str) -> None:
    """A fix id is declared once, in the rule file: a check may only narrow to declared ones."""
    undeclared = sorted(spec.fixes - set(declared))
    if undeclared:
        raise RuleFileError(
            f"check {name} names artifact fix(es) {', '.join(undeclared)}, which [fixes] artifact does not declare",
            path=source,
        )


def _no_unknown(table: dict[str, Any], known: set[str], prefix: str, source: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise RuleFileError(f"unknown key(s) {', '.join(prefix + k for k in unknown)}", path=source)


def _validate_message(message: str, spec: CheckSpec, source: str) -> None:
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(message) if f is not None}
    except ValueError as exc:
        raise RuleFileError(f"message template: {exc}", path=source) from None
    unknown = sorted(n for n in names if n.split(".")[0].split("[")[0] not in spec.fields)
    if unknown:
        raise RuleFileError(
            f"message uses {', '.join('{' + n + '}' for n in unknown)}, which check {spec.fn.__name__} does not "
            f"fill (it fills: {', '.join(sorted(spec.fields))})",
            path=source,
        )


def _options(spec: CheckSpec, table: dict[str, Any], source: str) -> Any:
    if spec.options is None:
        if table:
            raise RuleFileError(f"check {spec.fn.__name__} takes no [options]", path=source)
        return None
    return _typed(spec.options, table, "options", source)


def _typed(cls: type, table: dict[str, Any], section: str, source: str) -> Any:
    """Build dataclass `cls` from a TOML table, checking keys and value types."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    _no_unknown(table, set(fields), f"{section}.", source)
    for key, value in table.items():
        expected = _base_type(fields[key].type)
        if expected is not None and not isinstance(value, expected):
            raise RuleFileError(f"{section}.{key} must be {fields[key].type}, not {type(value).__name__}", path=source)
    obj = cls(**table)
    if section == "relations":
        for kind in obj.claims + obj.reports_unclaimed:
            if kind not in CLAIM_KINDS:
                raise RuleFileError(f"relations: unknown claim kind {kind!r} (known: {CLAIM_KINDS})", path=source)
        if obj.without_consequences not in (None, *SEVERITIES):
            raise RuleFileError(f"relations.without_consequences: unknown severity {obj.without_consequences!r}")
    return obj


def _base_type(annotation: Any) -> type | tuple[type, ...] | None:
    """The runtime type a TOML value must have for a dataclass field annotation (stringified
    by `from __future__ import annotations`)."""
    text = str(annotation).replace(" ", "")
    if text.startswith(("list[", "list")):
        return list
    if text.startswith(("dict[", "dict")):
        return dict
    if text.startswith("str|None"):
        return (str, type(None))
    scalars: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "float": (int, float), "bool": bool}
    return scalars.get(text)


@lru_cache(maxsize=1)
def load_rules() -> dict[str, Rule]:
    checks = load_all()
    rules: dict[str, Rule] = {}
    for entry in sorted(resources.files("mtplint.ruledata").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            rule = parse_rule(entry.read_text(), f"rules/{entry.name}", checks)
            if rule.code in rules:
                raise RuleFileError(f"duplicate rule code {rule.code}", path=f"rules/{entry.name}")
            rules[rule.code] = rule
    return rules
