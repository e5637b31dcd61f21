"""What `mtplint fix` prints: the lint's counts, the plan, a dry run's diff, and the outcome of a fix
(local or on a hub repository): what was kept, what was rolled back and why."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click

from ..config.schema import Settings
from ..core.errors import EXIT_FINDINGS, EXIT_OK
from ..core.findings import Finding
from ..core.textsafe import terminal_safe, terminal_safe_lines


def counts(findings: list[Finding]) -> str:
    sev = Counter(f.severity for f in findings)
    codes = Counter(f.code for f in findings)
    detail = ", ".join(f"{c} x{n}" for c, n in sorted(codes.items()))
    return f"{sev['error']} error(s), {sev['warning']} warning(s), {sev['info']} info" + (
        f" ({detail})" if detail else ""
    )


def list_failing(
    findings: list[Finding],
    leaves: set[str],
    expects: dict[str, str] | None = None,
    tried: frozenset[str] | None = frozenset(),
) -> None:
    """Each finding left, with what may still resolve it: an artifact fix this run has not tried
    (`tried`; None: every fix was), else the runtime patch: never the fix just undone, again."""
    for f in findings:
        kept = "  [kept on purpose]" if f.id in leaves else ""
        click.echo(f"  {f.code} {f.severity:<7} {terminal_safe(f.message.strip())}{kept}")
        untried = [] if tried is None else [a for a in f.fixes.artifact if a not in tried]
        if expects and f.code in expects:
            click.echo(f"      expected: {terminal_safe(expects[f.code])}")
        elif kept:
            continue
        elif untried:
            click.echo(f"      -> mtplint fix --only {','.join(untried)}")
        elif f.fixes.patches:
            ids = ",".join(f.fixes.patches)
            serve = terminal_safe(f.fixes.serve or f"MTPLINT_PATCHES={ids} vllm serve ...")
            click.echo(f"      -> runtime patch {ids}: {serve}")


def report_outcome(outcome: Any, s: Settings, only: list[str] | None = None) -> int:
    """What was rolled back and why, then the lint of what was kept; exit 1 after any rollback.
    A finding left names no fix this run already tried (`only`, or every fix)."""
    from ..fixer.pipeline import blocking

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
    tried = frozenset(only) if only else None
    list_failing(outcome.final.findings, leaves, {k: v for c in kept for k, v in c.expects.items()}, tried)
    remaining = [f for f in blocking(outcome.final.findings, s.lint.fail_on) if f.id not in leaves]
    return EXIT_FINDINGS if remaining or outcome.rolled_back else EXIT_OK


def plan_and_show(before: Any, s: Settings, only: list[str] | None) -> tuple[Any, Any, set[str], list] | int:
    """Print the lint's counts and the plan; the exit code where that is all there is to do
    (nothing to fix, a dry run), else (plans, rendered files, leaves, failing findings)."""
    from ..fixer.pipeline import plan_fixes, render_all

    click.echo(f"lint: {counts(before.findings)}")
    plans, changes, leaves, failing = plan_fixes(before, only, bool(s.output.drop_dead), s.lint.fail_on)
    if not changes:
        click.echo("nothing to fix" + (" with " + ", ".join(only) if only else ""))
        list_failing(failing, leaves)
        return EXIT_FINDINGS if failing else EXIT_OK
    print_plan(plans)
    rendered = render_all(before.inventory.root, plans)  # a hub snapshot's files: read only
    if s.output.dry_run:
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
    from ..fixer.pipeline import unaddressed

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
