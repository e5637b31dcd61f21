"""Load the declarative rule files shipped in rules/ (package mtplint.ruledata)."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

from ..errors import MtplintError
from .rule import Explanation, Rule

REQUIRED = ("code", "name", "severity", "summary", "check", "message", "explanation")


def parse_rule(text: str, source: str) -> Rule:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MtplintError(f"rule file is not valid TOML: {exc}", path=source) from None
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise MtplintError(f"rule file lacks {', '.join(missing)}", path=source)
    if data["severity"] not in ("error", "warning", "info"):
        raise MtplintError(f"unknown severity {data['severity']!r}", path=source)
    ex = data["explanation"]
    return Rule(
        code=data["code"],
        name=data["name"],
        severity=data["severity"],
        summary=data["summary"],
        explanation=Explanation(
            what=ex.get("what", ""), why=ex.get("why", ""), example=ex.get("example", ""), fix=ex.get("fix", "")
        ),
        check=data["check"],
        options=data.get("options", {}),
        message=data["message"],
        references=list(data.get("references", [])),
        fixes={
            "patches": list(data.get("fixes", {}).get("patches", [])),
            "artifact": list(data.get("fixes", {}).get("artifact", [])),
        },
        applies_to=data.get("applies_to", {}),
        source_file=source,
    )


@lru_cache(maxsize=1)
def load_rules() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for entry in sorted(resources.files("mtplint.ruledata").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            rule = parse_rule(entry.read_text(), f"rules/{entry.name}")
            if rule.code in rules:
                raise MtplintError(f"duplicate rule code {rule.code}", path=f"rules/{entry.name}")
            rules[rule.code] = rule
    return rules
