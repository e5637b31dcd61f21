"""Command line: `mtplint PATH [options]`, `mtplint rule CODE`, `mtplint rules`.

Exit codes: 0 nothing at or above --fail-on, 1 findings, 2 bad input or usage,
3 internal or probe failure.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from . import __version__
from .cli_options import probe_options
from .color import COLOR_MODES
from .draft import check_usage as check_draft_usage
from .errors import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK
from .exit_guard import guarded
from .findings import SEVERITY_RANK
from .progress import progress_reporter
from .reference import check_usage as check_reference_usage
from .settings import load_and_announce

if TYPE_CHECKING:
    from .reporters.report_set import Checked


class DefaultGroup(click.Group):
    """`mtplint PATH ...` means `mtplint check PATH ...`, like `ruff PATH`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version", "-V"):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="mtplint")
def main() -> None:
    """Will this checkpoint load and draft correctly with MTP on this vLLM?"""


@main.command("check")
@click.argument("path", nargs=-1, required=True, metavar="PATH...", type=click.Path())
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
@click.option(
    "--baseline",
    type=click.Path(path_type=Path),
    help="Accept the findings recorded in FILE; only new ones count (one PATH).",
)
@click.option(
    "--write-baseline", type=click.Path(path_type=Path), help="Record this run's findings in FILE (JSON; one PATH)."
)
@click.option(
    "--output-format",
    type=click.Choice(["concise", "full"]),
    help="Text report: one line per root cause, or every finding with its evidence [concise].",
)
@click.option("-v", "--verbose", is_flag=True, help="Same as --output-format full.")
@click.option("--statistics", is_flag=True, help="Text report: counts per rule instead of the findings.")
@click.option(
    "--color",
    type=click.Choice(COLOR_MODES),
    help="Colour the text report [auto: on a terminal; NO_COLOR turns it off, FORCE_COLOR on].",
)
@click.option(
    "--repo-root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Repository root that SARIF and GitHub annotation paths are relative to [git top level of PATH].",
)
@click.option(
    "--draft",
    metavar="PATH",
    help="A draft served from its own checkpoint (directory or hf://ORG/NAME[@REVISION]): lint it as "
    "vLLM builds it for the target PATH (--speculative-config model).",
)
@click.option(
    "--method",
    metavar="METHOD",
    help="Speculative method, any the probed vLLM declares: of --draft [read from it as vLLM reads it], "
    "or a drafter the target carries (dspark; mtp is the default).",
)
@click.option(
    "--reference",
    metavar="PATH",
    help="The source checkpoint PATH was converted from (directory or hf://ORG/NAME[@REVISION]), read "
    "header-only: report an MTP block stored below its precision or changed by the converter (MTP019, MTP020).",
)
@click.option(
    "--serve-args-file",
    metavar="FILE",
    help="Your `vllm serve` command (or its flags) in FILE: lint exactly that deployment, parsed by the "
    "probed vLLM's own parser (same as `mtplint check -- vllm serve PATH FLAGS...`).",
)
@probe_options
def check_cmd(path: tuple[str, ...], **opts: Any) -> None:
    """Lint each PATH (a checkpoint directory or hf://ORG/NAME[@REVISION]) against the probed
    vLLM. Several PATHs give one report per --format and exit with the worst code.
    `mtplint check -- vllm serve PATH FLAGS...` lints the deployment that command starts."""
    if path[:2] == ("vllm", "serve"):
        if len(path) < 3 or path[2].startswith("-"):
            sys.exit(guarded(_serve_without_model, bool(opts.get("debug"))))
        opts["serve_command"] = list(path)
        path = (path[2],)
    if len(path) > 1 and (opts.get("draft") or opts.get("method") or opts.get("reference")):
        sys.exit(guarded(lambda: _draft_with_many(opts, len(path)), bool(opts.get("debug"))))
    if len(path) == 1:
        sys.exit(run_check(Path(path[0]), opts))
    from .check_many import run_check_many

    sys.exit(run_check_many(list(path), opts))


def _draft_with_many(opts: dict[str, Any], paths: int) -> int:
    check_draft_usage(opts, paths)  # raises: a draft belongs to one target
    check_reference_usage(opts, paths)  # raises: a reference is one checkpoint's source
    return EXIT_BAD_INPUT


def _serve_without_model() -> int:
    from .errors import BadInput

    raise BadInput("vllm serve command: name the checkpoint to lint as its model (vllm serve PATH FLAGS...)")


def run_check(path: Path, opts: dict[str, Any]) -> int:
    return guarded(lambda: _check(path, usable_settings(path, opts)), bool(opts.get("debug")))


def usable_settings(path: Path, opts: dict[str, Any], *, announce: bool = True) -> dict[str, Any]:
    """The settings (command line over project file over checkpoint file), judged as far as
    they can be before probing: a usage error is exit 2 now, not after the probe."""
    from .engine.loader import load_rules
    from .settings import load_settings
    from .usage import check_outputs, check_settings, check_timeout

    check_timeout(opts.get("probe_timeout"))  # as given: the merged settings read a 0 as "not set"
    s = load_and_announce(path, opts) if announce else load_settings(path, opts)
    rules = load_rules()
    check_settings(s, rules, {c: r.name for c, r in rules.items()})
    check_draft_usage(s, 1)
    check_reference_usage(s, 1)
    check_outputs(list(s["formats"] or ["text"]), list(s["outputs"]))
    return s


def _check(path: Path, s: dict[str, Any]) -> int:
    from .engine.loader import load_rules

    linted, result, notes = lint_with_policy(path, s, progress=progress_reporter(s["quiet"]))
    for line in notes:
        click.echo(line, err=True)
    _report(path, s, linted, result, load_rules())
    return exit_code(result, s["fail_on"])


def lint_with_policy(path: Path, s: dict[str, Any], progress: Any = None) -> tuple[Any, Any, list[str]]:
    """The lint, then [[suppress]] and --baseline: (linted, result, lines for stderr). What
    `mtplint check` and the Python API (mtplint.lint) share."""
    from .session import lint
    from .suppressions import Policy

    policy = Policy.from_settings(s)  # before the probe: an unreadable --baseline is exit 2 at once
    linted = lint(path, s, progress=progress)
    result = linted.result()
    result.inputs = {**result.inputs, "settings_files": s["settings_files"]}
    notes = policy.apply(result)  # [[suppress]] and --baseline: the findings left decide the exit code
    return linted, result, notes


def exit_code(result: Any, fail_on: str) -> int:
    worst = max((SEVERITY_RANK[f.severity] for f in result.findings), default=-1)
    return EXIT_FINDINGS if worst >= SEVERITY_RANK[fail_on] else EXIT_OK


def _report(path: Path, s: dict[str, Any], linted: Any, result: Any, rules: dict[str, Any]) -> None:
    """Every --format to its --output (stdout by default), and the GitHub job summary."""
    from .reporters import render
    from .reporters.github import write_step_summary

    checked = checked_report(str(path), s, linted, result)
    full = s.get("output_format") == "full" or bool(s.get("verbose"))
    for fmt, out, color in output_targets(s):
        text = render(
            result,
            fmt,
            rules,
            color=color,
            fail_on=s["fail_on"],
            uri_prefix=checked.uri_prefix,
            full=full,
            statistics=bool(s.get("statistics")),
            modules=checked.modules,
        )
        emit(text, out, color)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        write_step_summary(result, rules, checked.modules)


def checked_report(given: str, s: dict[str, Any], linted: Any, result: Any) -> Checked:
    """What a checkpoint's report is rendered with besides its result: the draft's module table
    (full text, job summary) and its path relative to the repository root (sarif, github)."""
    from .reporters.lines import repo_prefix
    from .reporters.modules import draft_modules
    from .reporters.report_set import Checked

    formats = set(s["formats"] or ["text"])
    full = s.get("output_format") == "full" or bool(s.get("verbose"))
    summary = bool(os.environ.get("GITHUB_STEP_SUMMARY"))
    modules = draft_modules(linted.inventory, linted.report, result.findings) if full or summary else None
    # A hub repository's inputs path is hf://ORG/NAME@COMMIT: its files are named from there, not a repo root.
    # With --draft the files named are the draft's: its repository root, not the target's.
    where = linted.inventory.origin or s.get("draft") or given
    uri_prefix = repo_prefix(where, s.get("repo_root")) if {"sarif", "github"} & formats else ""
    return Checked(given, result, uri_prefix, modules, s["fail_on"])


def output_targets(s: dict[str, Any]) -> list[tuple[str, Path | None, bool]]:
    """(format, file or None for stdout, colour) per --format."""
    from .color import use_color

    outputs = list(s["outputs"])
    targets = []
    for i, fmt in enumerate(s["formats"] or ["text"]):
        out = outputs[i] if outputs else None
        to_stdout = out is None or str(out) == "-"
        color = fmt == "text" and to_stdout and use_color(s.get("color") or "auto", sys.stdout)
        targets.append((fmt, None if to_stdout else out, color))
    return targets


def emit(text: str, out: Path | None, color: bool) -> None:
    if out is None:
        # color= says it was decided: click would strip the styles when not on a terminal.
        click.echo(text, nl=not text.endswith("\n"), color=color)
    else:
        out.write_text(text)


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
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_cmd(fmt: str) -> None:
    """List every rule: code, name, severity, summary."""
    import json

    from .engine.loader import load_rules

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


from .fix_cli import fix_cmd  # noqa: E402  (the fix command lives in its own module)

main.add_command(fix_cmd)
main.add_command(__import__("mtplint.env_cli").env_cli.env_cmd)  # `mtplint env ...` (lint/env_cli.py)
main.add_command(__import__("mtplint.matrix.command").matrix.command.matrix_cmd)  # `mtplint matrix ...`
main.add_command(__import__("mtplint.precommit").precommit.precommit_cmd)  # the pre-commit hook's entry
main.add_command(__import__("mtplint.twin.command").twin.command.twin_cmd)  # `mtplint twin` (lint/twin/)
main.add_command(__import__("mtplint.verify.command").verify.command.verify_cmd)  # `mtplint verify` (lint/verify/)


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
    except click.Abort:  # click's name for Ctrl-C (or EOF) before a command body's own guard runs
        click.echo("mtplint: interrupted", err=True)
        return EXIT_INTERRUPTED
    except SystemExit as exc:
        return int(exc.code or 0)
    return EXIT_OK


def run() -> None:
    sys.exit(cli_entry())
