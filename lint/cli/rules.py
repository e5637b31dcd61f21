"""`mtplint rule CODE` and `mtplint rules`: a rule's explanation page, and the list of every rule."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..core.errors import EXIT_BAD_INPUT


@click.command("rule")
@click.argument("code")
def rule_cmd(code: str) -> None:
    """Explain one rule: what it checks, why it breaks, an example and the fix."""
    from ..engine.loader import load_rules
    from ..engine.render_rule import render_rule

    rules = load_rules()
    rule = rules.get(code.upper()) or next((r for r in rules.values() if r.name == code), None)
    if rule is None:
        click.echo(f"mtplint: error: unknown rule {code!r}; see `mtplint rules`", err=True)
        sys.exit(EXIT_BAD_INPUT)
    click.echo(render_rule(rule))


@click.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_cmd(fmt: str) -> None:
    """List every rule: code, name, severity, summary."""
    import json

    from ..engine.loader import load_rules

    rules = load_rules().values()
    if fmt == "json":
        click.echo(json.dumps([rule_record(r) for r in rules], indent=2))
        return
    for r in rules:
        click.echo(f"{r.code}  {r.name:<40} {r.severity:<8} {r.summary}")


def rule_record(r: Any) -> dict[str, Any]:
    """One rule as `mtplint rules --format json` lists it."""
    return {
        "code": r.code,
        "name": r.name,
        "severity": r.severity,
        "summary": r.summary,
        "help_uri": r.help_uri,
        "fixes": {"patches": list(r.fixes.get("patches", [])), "artifact": list(r.fixes.get("artifact", []))},
        "applies_to": r.applies_to.describe(),
        "references": list(r.references),
    }
