"""`mtplint fix hf://ORG/NAME --out DIR`: plan the fixes for a hub repository and write the files
they change into DIR, to upload as a pull request. The repository itself is never changed, and
huggingface_hub's cache (where its small files were read from) is never written to. The files are
kept in DIR only when a re-lint of them over the repository's snapshot adds no error (as for a
local fix); a fix that does is removed from DIR again (a file DIR held before is put back)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from ..config.schema import Settings
from ..core.errors import BadInput
from ..core.textsafe import terminal_safe


def fix_remote(path: Path, s: Settings, only: list[str] | None) -> int:
    from ..fixer.hub_overlay import copy_small_files
    from ..fixer.pipeline import apply_checked, lint
    from .fix_outcome import plan_and_show, report_outcome

    out = s.output.out
    if not out and not s.output.dry_run:
        raise BadInput(
            "fixing a hub repository needs --out DIR: the changed files are written there, to upload "
            "as a pull request (the repository itself is never changed); or --dry-run to see the diff"
        )
    before = lint(path, s)
    origin = before.inventory.origin or str(path)
    planned = plan_and_show(before, s, only)
    if isinstance(planned, int):
        return planned
    plans, rendered, _leaves, _failing = planned
    if rendered.shards:
        names = ", ".join(terminal_safe(n) for n in rendered.shards)
        raise BadInput(
            f"the plan writes new shards ({names}) copied from tensor data, which is not downloaded: "
            "run this fix on a local copy (huggingface-cli download), or choose other fixes with --only"
        )
    assert out  # without --out only --dry-run gets here, and it has returned
    out_dir = _make_out(Path(out))
    with tempfile.TemporaryDirectory(prefix="mtplint-hubfix-") as tmp:
        overlay = Path(tmp)
        copy_small_files(before.inventory.root, overlay)
        outcome = apply_checked(HubTarget(path, s, before, out_dir, overlay), before, plans, _say)
        code = report_outcome(outcome, s, only)
    if outcome.kept:
        repo = origin.removeprefix("hf://")
        click.echo(
            f"the files in {terminal_safe(str(out_dir))} are the fix for {terminal_safe(repo)}: upload them as a "
            f"pull request (e.g. `hf upload {terminal_safe(repo.partition('@')[0])} {terminal_safe(str(out_dir))} "
            "--create-pr`); the hub repository has not been changed"
        )
    return code


def _say(msg: str) -> None:
    click.echo(terminal_safe(msg))


def _make_out(out: Path) -> Path:
    out = out.expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(f"cannot create the output directory: {e.strerror or e}", path=str(out)) from e
    return out


class HubTarget:
    """--out DIR holds the changed files; `overlay` (the snapshot's small files with them written
    over) is what the re-lint reads. A rollback puts both back."""

    def __init__(self, path: Path, s: Settings, before: Any, out: Path, overlay: Path):
        self.path, self.s, self.before, self.out, self.overlay = path, s, before, out, overlay

    def render(self, changes: list[Any]) -> Any:
        from ..fixer.plan import render

        return render(self.overlay, changes)

    def write(self, rendered: Any) -> Any:
        from ..fixer.apply import write_atomic
        from ..fixer.guard import Journal

        journal = Journal.save(self.out, rendered, backups=False) + Journal.save(self.overlay, rendered, backups=False)
        for name, (_old, new) in rendered.json.items():
            target = self.out / name
            try:
                write_atomic(target, new.encode("utf-8"))
            except OSError as e:
                journal.restore()  # DIR holds a pull request: all of its files, or none
                raise BadInput(f"cannot write: {e.strerror or e}", path=str(target)) from e
            write_atomic(self.overlay / name, new.encode("utf-8"))
            click.echo(f"wrote {terminal_safe(str(target))}")
        return journal

    def relint(self) -> Any:
        from ..fixer.hub_overlay import overlay_inventory
        from ..fixer.pipeline import lint

        inventory = overlay_inventory(self.before.inventory, self.overlay)
        return lint(self.path, self.s, fresh=True, inventory=inventory)
