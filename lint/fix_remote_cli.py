"""`mtplint fix hf://ORG/NAME --out DIR`: plan the fixes for a hub repository and write the files
they change into DIR, to upload as a pull request. The repository itself is never changed, and
huggingface_hub's cache (where its small files were read from) is never written to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .errors import EXIT_FINDINGS, EXIT_OK, BadInput
from .textsafe import terminal_safe


def fix_remote(path: Path, s: dict[str, Any], only: list[str] | None) -> int:
    from .fix_cli import counts, list_failing, print_dry_run, print_plan
    from .fixer.pipeline import lint, plan_fixes, render_all

    out = s.get("out")
    if not out and not s.get("dry_run"):
        raise BadInput(
            "fixing a hub repository needs --out DIR: the changed files are written there, to upload "
            "as a pull request (the repository itself is never changed); or --dry-run to see the diff"
        )
    before = lint(path, s)
    origin = before.inventory.origin or str(path)
    click.echo(f"lint: {counts(before.findings)}")
    plans, changes, leaves, failing = plan_fixes(before, only, bool(s.get("drop_dead")), s["fail_on"])
    if not changes:
        click.echo("nothing to fix" + (" with " + ", ".join(only) if only else ""))
        list_failing(failing, leaves)
        return EXIT_FINDINGS if failing else EXIT_OK
    print_plan(plans)
    rendered = render_all(before.inventory.root, plans)  # the snapshot's files, read only
    if s.get("dry_run"):
        print_dry_run(rendered, plans, failing, leaves)
        return EXIT_OK
    if rendered.shards:
        names = ", ".join(terminal_safe(n) for n in rendered.shards)
        raise BadInput(
            f"the plan writes new shards ({names}) copied from tensor data, which is not downloaded: "
            "run this fix on a local copy (huggingface-cli download), or choose other fixes with --only"
        )
    assert out  # without --out only --dry-run gets here, and it has returned
    return _write_out(Path(out), rendered, origin)


def _write_out(out: Path, rendered: Any, origin: str) -> int:
    from .fixer.apply import write_atomic

    out = out.expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(f"cannot create the output directory: {e.strerror or e}", path=str(out)) from e
    for name, (_old, new) in rendered.json.items():
        target = out / name
        try:
            write_atomic(target, new.encode("utf-8"))
        except OSError as e:
            raise BadInput(f"cannot write: {e.strerror or e}", path=str(target)) from e
        click.echo(f"wrote {terminal_safe(str(target))}")
    repo = origin.removeprefix("hf://")
    click.echo(
        f"the files in {terminal_safe(str(out))} are the fix for {terminal_safe(repo)}: upload them as a pull "
        f"request (e.g. `hf upload {terminal_safe(repo.partition('@')[0])} {terminal_safe(str(out))} "
        "--create-pr`); the hub repository has not been changed"
    )
    return EXIT_OK
