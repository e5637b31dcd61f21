"""`mtplint check PATH [options]` (also `mtplint PATH`): lint one checkpoint, or several, or the
deployment a `vllm serve` command starts; report in every --format asked for."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..config.schema import Settings
from ..config.settings import Options, given_values
from ..core.errors import EXIT_BAD_INPUT
from ..core.exit_guard import guarded
from ..core.progress import progress_reporter
from ..pipeline.draft import check_usage as check_draft_usage
from ..pipeline.entry import exit_code, lint_with_policy, usable_settings
from ..pipeline.reference import check_usage as check_reference_usage
from ..reporters.color import COLOR_MODES
from .options import probe_options
from .output import checked_report, emit, output_targets


@click.command("check")
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
    from ..config.serve_args import is_serve_command

    if is_serve_command(path):
        from ..config.serve_args import model_source, split_command

        model = split_command(list(path), "vllm serve command")[0]  # positional or --model, as vLLM finds it
        if not model:
            sys.exit(guarded(_serve_without_model, bool(opts.get("debug"))))
        opts["serve_command"] = list(path)
        path = (model_source(model, list(path)),)  # ORG/NAME: the hub repository, as vLLM reads it
    if len(path) > 1 and (opts.get("draft") or opts.get("method") or opts.get("reference")):
        sys.exit(guarded(lambda: _draft_with_many(opts, len(path)), bool(opts.get("debug"))))
    if len(path) == 1:
        sys.exit(run_check(Path(path[0]), opts))
    from .check_many import run_check_many

    sys.exit(run_check_many(list(path), opts))


def _draft_with_many(opts: Options, paths: int) -> int:
    given = Settings.of(**given_values(opts)).lint
    check_draft_usage(given, paths)  # raises: a draft belongs to one target
    check_reference_usage(given, paths)  # raises: a reference is one checkpoint's source
    return EXIT_BAD_INPUT


def _serve_without_model() -> int:
    from ..core.errors import BadInput

    raise BadInput("vllm serve command: name the checkpoint to lint as its model (vllm serve PATH FLAGS...)")


def run_check(path: Path, opts: Options) -> int:
    return guarded(lambda: _check(path, usable_settings(path, opts)), bool(opts.get("debug")))


def _check(path: Path, s: Settings) -> int:
    from ..engine.loader import load_rules

    linted, result, notes = lint_with_policy(path, s, progress=progress_reporter(s.output.quiet))
    for line in notes:
        click.echo(line, err=True)
    _report(path, s, linted, result, load_rules())
    return exit_code(result, s.lint.fail_on)


def _report(path: Path, s: Settings, linted: Any, result: Any, rules: dict[str, Any]) -> None:
    """Every --format to its --output (stdout by default), and the GitHub job summary."""
    from ..reporters import render
    from ..reporters.github import write_step_summary

    checked = checked_report(str(path), s, linted, result)
    full = s.output.full
    for fmt, out, color in output_targets(s):
        text = render(
            result,
            fmt,
            rules,
            color=color,
            fail_on=s.lint.fail_on,
            uri_prefix=checked.uri_prefix,
            full=full,
            statistics=bool(s.output.statistics),
            modules=checked.modules,
        )
        emit(text, out, color)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        write_step_summary(result, rules, checked.modules)
