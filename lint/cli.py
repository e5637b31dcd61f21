"""Command line: `mtplint PATH [options]`, `mtplint rule CODE`, `mtplint rules`.

Exit codes: 0 nothing at or above --fail-on, 1 findings, 2 bad input or usage,
3 internal or probe failure.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from . import __version__
from .errors import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK, BadInput
from .findings import SEVERITY_RANK
from .session import guarded, probe_options, progress_reporter
from .settings import load_and_announce


class DefaultGroup(click.Group):
    """`mtplint PATH ...` means `mtplint check PATH ...`, like `ruff PATH`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mtplint")
def main() -> None:
    """Will this checkpoint load and draft correctly with MTP on this vLLM?"""


@main.command("check")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(["text", "json", "junit", "sarif", "github"]),
    help="Report format (repeatable).",
)
@click.option(
    "--output",
    "outputs",
    multiple=True,
    type=click.Path(path_type=Path),
    help="File for the matching --format (repeatable; '-' is stdout).",
)
@click.option("--select", help="Only these rule codes or prefixes (comma-separated).")
@click.option("--ignore", "ignore_codes", help="Skip these rule codes or prefixes (comma-separated).")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), help="Lowest severity that fails [error].")
@click.option("--with-patches", help="Re-probe with these mtplint runtime patch ids applied (comma-separated).")
@probe_options
def check_cmd(path: Path, **opts: Any) -> None:
    """Lint the checkpoint directory PATH against the probed vLLM."""
    sys.exit(_run_check(path, opts))


def _run_check(path: Path, opts: dict[str, Any]) -> int:
    return guarded(lambda: _check(path, load_and_announce(path, opts)), bool(opts.get("debug")))


def _check(path: Path, s: dict[str, Any]) -> int:
    from .engine.loader import load_rules
    from .reporters import render
    from .reporters.github import write_step_summary
    from .session import lint

    formats = s["formats"] or ["text"]
    outputs = s["outputs"]
    if outputs and len(outputs) != len(formats):
        raise BadInput("give one --output per --format")
    linted = lint(path, s, progress=progress_reporter(s["quiet"]))
    findings = linted.findings
    result = linted.result()
    result.inputs = {**result.inputs, "settings_files": s["settings_files"]}
    rules = load_rules()
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    for i, fmt in enumerate(formats):
        out = outputs[i] if outputs else None
        text = render(
            result, fmt, rules, color=color and out in (None, Path("-")) and fmt == "text", fail_on=s["fail_on"]
        )
        if out is None or str(out) == "-":
            click.echo(text, nl=not text.endswith("\n"))
        else:
            out.write_text(text)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        write_step_summary(result, rules)
    worst = max((SEVERITY_RANK[f.severity] for f in findings), default=-1)
    return EXIT_FINDINGS if worst >= SEVERITY_RANK[s["fail_on"]] else EXIT_OK


@main.command("rule")
@click.argument("code")
def rule_cmd(code: str) -> None:
    """Explain one rule: what it checks, why it breaks, an example and the fix."""
    from .engine.loader import load_rules
    from .engine.render_rule import render_rule

    rules = load_rules()
    rule = rules.get(code.upper()) or next((r for r in rules.values() if r.name == code), None)
    if rule is None:
        click.echo(f"mtplint: error: unknown rule {code!r}; see `mtplint rules`", err=True)
        sys.exit(EXIT_BAD_INPUT)
    click.echo(render_rule(rule))


@main.command("rules")
def rules_cmd() -> None:
    """List every rule: code, name, severity, summary."""
    from .engine.loader import load_rules

    for r in load_rules().values():
        click.echo(f"{r.code}  {r.name:<40} {r.severity:<8} {r.summary}")


from .fix_cli import fix_cmd  # noqa: E402  (the fix command lives in its own module)

main.add_command(fix_cmd)


def cli_entry(argv: list[str] | None = None) -> int:
    try:
        main.main(args=argv, prog_name="mtplint", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:  # click's default would be 2 for these, 1 for others
        exc.show()
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT
    except click.Abort:
        return EXIT_INTERNAL
    except SystemExit as exc:
        return int(exc.code or 0)
    return EXIT_OK


def run() -> None:
    sys.exit(cli_entry())
