"""`mtplint fix PATH`: plan artifact-side fixes from a lint, apply them, lint again.

Exit codes: 0 nothing to fix, or fixed (the re-lint has nothing at or above --fail-on
beyond entries kept on purpose); 1 findings remain that no artifact fix resolves, or a fix
was rolled back (its re-lint added an error or failed); 2 bad input or usage; 3 internal
error or probe failure. Wired into the CLI by cli.py.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click

from .cli_options import probe_options
from .errors import EXIT_FINDINGS, EXIT_OK, BadInput
from .exit_guard import guarded
from .findings import Finding
from .progress import progress_reporter
from .settings import load_and_announce
from .textsafe import terminal_safe, terminal_safe_lines


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


def _run_fix(path: Path, opts: dict[str, Any]) -> int:
    return guarded(lambda: _fix(path, load_and_announce(path, opts)), bool(opts.get("debug")))


def counts(findings: list[Finding]) -> str:
    sev = Counter(f.severity for f in findings)
    codes = Counter(f.code for f in findings)
    detail = ", ".join(f"{c} x{n}" for c, n in sorted(codes.items()))
    return f"{sev['error']} error(s), {sev['warning']} warning(s), {sev['info']} info" + (
        f" ({detail})" if detail else ""
    )


def list_failing(findings: list[Finding], leaves: set[str], expects: dict[str, str] | None = None) -> None:
    for f in findings:
        kept = "  [kept on purpose]" if f.id in leaves else ""
        click.echo(f"  {f.code} {f.severity:<7} {terminal_safe(f.message.strip())}{kept}")
        if expects and f.code in expects:
            click.echo(f"      expected: {terminal_safe(expects[f.code])}")
        elif f.fixes.artifact and not kept:
            click.echo(f"      -> mtplint fix --only {','.join(f.fixes.artifact)}")


def _fix(path: Path, s: dict[str, Any]) -> int:
    """A run that may write holds the checkpoint's fix lock from its first lint to its re-lint,
    so a concurrent run waits and then plans from what this one wrote. A dry run writes nothing
    (not even the lock) and works on a read-only checkpoint."""
    from .fixer.pipeline import parse_only
    from .fixer.workdir import fix_lock, remove_leftovers
    from .inventory.remote import hub_spec

    only = parse_only(s.get("only"))
    if hub_spec(path) is not None:  # never written in place: its files go to --out
        from .fix_remote_cli import fix_remote

        return fix_remote(path, s, only)
    if s.get("out"):
        raise BadInput("--out is for a hub repository (hf://ORG/NAME); a local checkpoint is fixed in place")
    root = path.expanduser().absolute()
    if s.get("dry_run") or not root.is_dir():  # a missing directory is reported by the lint
        return _lint_plan_apply(path, s, only)
    with fix_lock(root, lambda msg: click.echo(f"mtplint: {terminal_safe(msg)}", err=True)):
        removed = remove_leftovers(root)
        if removed:
            names = ", ".join(terminal_safe(n) for n in removed)
            click.echo(f"removed {len(removed)} leftover temp file(s) of an interrupted fix: {names}")
        return _lint_plan_apply(path, s, only)


def _lint_plan_apply(path: Path, s: dict[str, Any], only: list[str] | None) -> int:
    from .fixer.pipeline import apply_checked, lint

    say = progress_reporter(s["quiet"])
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
    return report_outcome(apply_checked(LocalTarget(root, path, s, say), before, plans, _say), s)


def _say(msg: str) -> None:
    click.echo(terminal_safe(msg))


class LocalTarget:
    """The checkpoint directory, written in place (originals kept as *.mtplint-orig)."""

    def __init__(self, root: Path, path: Path, s: dict[str, Any], say: Any):
        self.root, self.path, self.s, self.say = root, path, s, say

    def render(self, changes: list[Any]) -> Any:
        from .fixer.plan import render

        return render(self.root, changes)

    def write(self, rendered: Any) -> Any:
        from .fixer.guard import Journal

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
        from .fixer.pipeline import lint

        if self.say:
            self.say("linting again (new probe)")
        return lint(self.path, self.s, fresh=True, progress=self.say)


def report_outcome(outcome: Any, s: dict[str, Any]) -> int:
    """What was rolled back and why, then the lint of what was kept; exit 1 after any rollback."""
    from .fixer.pipeline import blocking

    if not outcome.wrote:
        click.echo("nothing to write")
    for v in outcome.rolled_back:
        click.echo(f"rolled back {', '.join(v.fix_ids)}: ", nl=False)
        if v.failure is not None:
            click.echo(f"the re-lint failed: {terminal_safe(v.failure)}")
        else:
            click.echo(f"it adds {len(v.added)} error(s) the lint before did not have:")
            for f in v.added:
                click.echo(f"  {f.code} {f.severity:<7} {terminal_safe(f.message.strip())}")
        click.echo("  its changes (undone):")
        for c in v.changes:
            click.echo(f"    {c.fix}: {terminal_safe(c.summary)}")
    kept = [c for v in outcome.kept for c in v.changes]
    leaves = {i for c in kept for i in c.leaves}
    if outcome.rolled_back and not kept:
        click.echo("every file is as it was before the fix")
    label = "re-lint" if kept else "lint"
    click.echo(f"{label}: {counts(outcome.final.findings)}")
    list_failing(outcome.final.findings, leaves, {k: v for c in kept for k, v in c.expects.items()})
    remaining = [f for f in blocking(outcome.final.findings, s["fail_on"]) if f.id not in leaves]
    return EXIT_FINDINGS if remaining or outcome.rolled_back else EXIT_OK


def plan_and_show(before: Any, s: dict[str, Any], only: list[str] | None) -> tuple[Any, Any, set[str], list] | int:
    """Print the lint's counts and the plan; the exit code where that is all there is to do
    (nothing to fix, a dry run), else (plans, rendered files, leaves, failing findings)."""
    from .fixer.pipeline import plan_fixes, render_all

    click.echo(f"lint: {counts(before.findings)}")
    plans, changes, leaves, failing = plan_fixes(before, only, bool(s.get("drop_dead")), s["fail_on"])
    if not changes:
        click.echo("nothing to fix" + (" with " + ", ".join(only) if only else ""))
        list_failing(failing, leaves)
        return EXIT_FINDINGS if failing else EXIT_OK
    print_plan(plans)
    rendered = render_all(before.inventory.root, plans)  # a hub snapshot's files: read only
    if s.get("dry_run"):
        print_dry_run(rendered, plans, failing, leaves)
        return EXIT_OK
    return plans, rendered, leaves, failing


def print_plan(plans: dict[str, list[Any]]) -> None:
    click.echo("plan:")
    for fid, cs in plans.items():
        if not cs:
            continue
        click.echo(f"  {fid}")
        for c in cs:
            click.echo(f"    {terminal_safe(c.summary)}")
            for note in c.notes:
                click.echo(f"      note: {terminal_safe(note)}")


def print_dry_run(rendered: Any, plans: dict[str, list[Any]], failing: list[Finding], leaves: set[str]) -> None:
    from .fixer.pipeline import unaddressed

    diff = rendered.diff()
    if diff:
        click.echo(terminal_safe_lines(diff), nl=False)
    for name, tensors in rendered.shards.items():
        click.echo(f"new shard {terminal_safe(name)}:")
        for t in tensors:
            src = terminal_safe(t.source_file)
            click.echo(
                f"  {terminal_safe(t.name)} {t.dtype} {list(t.shape)} <- {src} [{t.source_begin}:{t.source_end}]"
            )
    left = unaddressed(failing, {f for f, cs in plans.items() if cs})
    if left:
        click.echo("not named by any planned fix (the re-lint after applying tells whether they remain):")
        list_failing(left, leaves)
    click.echo("dry run: nothing written")


def _write(root: Path, rendered: Any) -> None:
    from .fixer.apply import WriteFailed, apply

    try:
        written = apply(root, rendered)
    except WriteFailed as e:  # a full disk, or a file made read-only since the check: bad input, not a bug
        raise e.bad_input() from e
    for name, kept in written:
        click.echo(f"wrote {name}" + (f" (original kept as {terminal_safe(kept.name)})" if kept is not None else ""))


if __name__ == "__main__":  # `python -m mtplint.fix_cli PATH`, before cli.py registers the command
    fix_cmd()
