"""`mtplint fix PATH`: plan artifact-side fixes from a lint, apply them, lint again.

Exit codes: 0 nothing to fix, or fixed (the re-lint has nothing at or above --fail-on
beyond entries kept on purpose); 1 findings remain that no artifact fix resolves, or a fix
was rolled back (its re-lint added an error or failed); 2 bad input or usage; 3 internal
error or probe failure. Wired into the CLI by cli.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..config.schema import Settings
from ..config.settings import Options, load_and_announce
from ..core.errors import EXIT_FINDINGS, EXIT_OK, BadInput
from ..core.exit_guard import guarded
from ..core.progress import progress_reporter
from ..core.textsafe import terminal_safe
from .fix_outcome import list_failing, plan_and_show, report_outcome
from .options import probe_options


@click.command("fix")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--only", help="Only these fix ids (comma-separated); default: every fix the findings recommend.")
@click.option("--dry-run", is_flag=True, help="Print the diff of every JSON file and the shards to add; write nothing.")
@click.option(
    "--drop-dead", is_flag=True, help="rewrite-ignore-to-runtime-names: also remove the dead entries (kept by default)."
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "info"]),
    help="Lowest severity of a remaining finding that fails [error].",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="hf://ORG/NAME: write the changed files into DIR, to upload as a pull request.",
)
@probe_options
def fix_cmd(path: Path, **opts: Any) -> None:
    """Fix the checkpoint directory PATH so that vLLM loads its MTP draft, then lint it again.

    A fix is kept only when that re-lint has no error the first lint did not have: otherwise
    every file it wrote is put back as it was, the report names the fix, its changes and the
    new errors, and the exit code is 1. With several fixes, each is then retried on its own
    (one probe per fix), so only a harmful one is rolled back."""
    sys.exit(_run_fix(path, opts))


def _run_fix(path: Path, opts: Options) -> int:
    return guarded(lambda: _fix(path, load_and_announce(path, opts)), bool(opts.get("debug")))


def _fix(path: Path, s: Settings) -> int:
    """A run that may write holds the checkpoint's fix lock from its first lint to its re-lint,
    so a concurrent run waits and then plans from what this one wrote. A dry run writes nothing
    (not even the lock) and works on a read-only checkpoint."""
    from ..fixer.pipeline import parse_only
    from ..fixer.workdir import fix_lock, remove_leftovers
    from ..inventory.remote import hub_spec

    only = parse_only(s.output.only)
    if hub_spec(path) is not None:  # never written in place: its files go to --out
        from .fix_remote import fix_remote

        return fix_remote(path, s, only)
    if s.output.out:
        raise BadInput("--out is for a hub repository (hf://ORG/NAME); a local checkpoint is fixed in place")
    root = path.expanduser().absolute()
    if s.output.dry_run or not root.is_dir():  # a missing directory is reported by the lint
        return _lint_plan_apply(path, s, only)
    with fix_lock(root, lambda msg: click.echo(f"mtplint: {terminal_safe(msg)}", err=True)):
        removed = remove_leftovers(root)
        if removed:
            names = ", ".join(terminal_safe(n) for n in removed)
            click.echo(f"removed {len(removed)} leftover temp file(s) of an interrupted fix: {names}")
        return _lint_plan_apply(path, s, only)


def _lint_plan_apply(path: Path, s: Settings, only: list[str] | None) -> int:
    from ..fixer.pipeline import apply_checked, lint

    say = progress_reporter(s.output.quiet)
    if say:
        say(f"linting {path}")
    before = lint(path, s, progress=say)
    root = before.inventory.root
    planned = plan_and_show(before, s, only)
    if isinstance(planned, int):
        return planned
    plans, rendered, leaves, failing = planned

    if not rendered.json and not rendered.shards:
        click.echo("nothing to write")
        list_failing(failing, leaves)
        return EXIT_FINDINGS if failing else EXIT_OK
    return report_outcome(apply_checked(LocalTarget(root, path, s, say), before, plans, _say), s, only)


def _say(msg: str) -> None:
    click.echo(terminal_safe(msg))


class LocalTarget:
    """The checkpoint directory, written in place (originals kept as *.mtplint-orig)."""

    def __init__(self, root: Path, path: Path, s: Settings, say: Any):
        self.root, self.path, self.s, self.say = root, path, s, say

    def render(self, changes: list[Any]) -> Any:
        from ..fixer.plan import render

        return render(self.root, changes)

    def write(self, rendered: Any) -> Any:
        from ..fixer.guard import Journal

        if self.say:
            self.say("writing")
        journal = Journal.save(self.root, rendered)
        try:
            _write(self.root, rendered)
        except BaseException:
            journal.discard()  # a failed write is reported as written so far (WriteFailed)
            raise
        return journal

    def relint(self) -> Any:
        from ..fixer.pipeline import lint

        if self.say:
            self.say("linting again (new probe)")
        return lint(self.path, self.s, fresh=True, progress=self.say)


def _write(root: Path, rendered: Any) -> None:
    from ..fixer.apply import WriteFailed, apply

    try:
        written = apply(root, rendered)
    except WriteFailed as e:  # a full disk, or a file made read-only since the check: bad input, not a bug
        raise e.bad_input() from e
    for name, kept in written:
        click.echo(f"wrote {name}" + (f" (original kept as {terminal_safe(kept.name)})" if kept is not None else ""))
