"""`mtplint fix PATH`: plan artifact-side fixes from a lint, apply them, lint again.

Exit codes: 0 nothing to fix, or fixed (the re-lint has nothing at or above --fail-on
beyond entries kept on purpose); 1 findings remain that no artifact fix resolves; 2 bad
input or usage; 3 internal error or probe failure. Wired into the CLI by cli.py.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click

from .errors import EXIT_FINDINGS, EXIT_OK
from .findings import Finding
from .session import guarded, probe_options, progress_reporter
from .settings import load_settings


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
@probe_options
def fix_cmd(path: Path, **opts: Any) -> None:
    """Fix the checkpoint directory PATH so that vLLM loads its MTP draft, then lint it again."""
    sys.exit(_run_fix(path, opts))


def _run_fix(path: Path, opts: dict[str, Any]) -> int:
    return guarded(lambda: _fix(path, load_settings(path, opts)), bool(opts.get("debug")))


def _counts(findings: list[Finding]) -> str:
    sev = Counter(f.severity for f in findings)
    codes = Counter(f.code for f in findings)
    detail = ", ".join(f"{c} x{n}" for c, n in sorted(codes.items()))
    return f"{sev['error']} error(s), {sev['warning']} warning(s), {sev['info']} info" + (
        f" ({detail})" if detail else ""
    )


def _list(findings: list[Finding], leaves: set[str], expects: dict[str, str] | None = None) -> None:
    for f in findings:
        kept = "  [kept on purpose]" if f.id in leaves else ""
        click.echo(f"  {f.code} {f.severity:<7} {f.message}{kept}")
        if expects and f.code in expects:
            click.echo(f"      expected: {expects[f.code]}")
        elif f.fixes.artifact and not kept:
            click.echo(f"      -> mtplint fix --only {','.join(f.fixes.artifact)}")


def _fix(path: Path, s: dict[str, Any]) -> int:
    from .fixer.apply import BACKUP_SUFFIX, apply
    from .fixer.run import blocking, choose, lint, parse_only, plan_all, render_all, unaddressed

    only = parse_only(s.get("only"))
    say = progress_reporter(s["quiet"])
    if say:
        say(f"linting {path}")
    before = lint(path, s, progress=say)
    root = before.inventory.root
    click.echo(f"lint: {_counts(before.findings)}")
    fixes = choose(only, before.findings)
    plans = plan_all(before, fixes, {"drop_dead": bool(s.get("drop_dead"))})
    changes = [c for cs in plans.values() for c in cs]
    leaves = {i for c in changes for i in c.leaves}
    failing = [f for f in blocking(before.findings, s["fail_on"]) if f.id not in leaves]
    if not changes:
        click.echo("nothing to fix" + (" with " + ", ".join(only) if only else ""))
        _list(failing, leaves)
        return EXIT_FINDINGS if failing else EXIT_OK

    click.echo("plan:")
    for fid, cs in plans.items():
        if not cs:
            continue
        click.echo(f"  {fid}")
        for c in cs:
            click.echo(f"    {c.summary}")
            for note in c.notes:
                click.echo(f"      note: {note}")
    rendered = render_all(root, plans)
    if s.get("dry_run"):
        diff = rendered.diff()
        if diff:
            click.echo(diff, nl=False)
        for name, tensors in rendered.shards.items():
            click.echo(f"new shard {name}:")
            for t in tensors:
                click.echo(f"  {t.name} {t.dtype} {list(t.shape)} <- {t.source_file} [{t.source_begin}:{t.source_end}]")
        left = unaddressed(failing, {f for f, cs in plans.items() if cs})
        if left:
            click.echo("not named by any planned fix (the re-lint after applying tells whether they remain):")
            _list(left, leaves)
        click.echo("dry run: nothing written")
        return EXIT_OK

    if not rendered.json and not rendered.shards:
        click.echo("nothing to write")
        _list(failing, leaves)
        return EXIT_FINDINGS if failing else EXIT_OK
    if say:
        say("writing")
    written = apply(root, rendered)
    for name in written:
        kept = (
            f" (original kept as {name}{BACKUP_SUFFIX})"
            if name in rendered.json and rendered.json[name][0] is not None
            else ""
        )
        click.echo(f"wrote {name}{kept}")
    if say:
        say("linting again (new probe)")
    after = lint(path, s, fresh=True, progress=say)
    click.echo(f"re-lint: {_counts(after.findings)}")
    _list(after.findings, leaves, {k: v for c in changes for k, v in c.expects.items()})
    remaining = [f for f in blocking(after.findings, s["fail_on"]) if f.id not in leaves]
    return EXIT_FINDINGS if remaining else EXIT_OK


if __name__ == "__main__":  # `python -m mtplint.fix_cli PATH`, before cli.py registers the command
    fix_cmd()
