"""`mtplint pre-commit [OPTIONS] FILES...`: the entry of the pre-commit hook (.pre-commit-hooks.yaml).

pre-commit passes the changed files that match the hook's `files` pattern (a checkpoint's
config.json, safetensors index, hf_quant_config.json or mtplint.toml). Each maps to the
checkpoint directory it belongs to; each directory is linted once, with the options given
before the files (the hook's `args`), and the exit code is the worst of the runs: 0, 1
findings, 2 bad input, 3 probe failure; an interrupt stops at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from ..core.errors import EXIT_BAD_INPUT, EXIT_OK

# A changed file among these means its directory's lint may have changed.
TRIGGERS = ("config.json", "model.safetensors.index.json", "hf_quant_config.json", "mtplint.toml")


def is_checkpoint(directory: Path) -> bool:
    """A config.json with safetensors beside it (or their index). A repository holds other
    config.json files (editor, frontend, tool settings); those are not linted."""
    if not (directory / "config.json").is_file():
        return False
    return (directory / "model.safetensors.index.json").is_file() or any(directory.glob("*.safetensors"))


def checkpoint_dirs(files: Iterable[str | Path]) -> list[Path]:
    """The checkpoint directories of the changed files: each once, in the order first named."""
    seen: set[str] = set()
    found: list[Path] = []
    for name in files:
        file = Path(name)
        if file.name not in TRIGGERS or not is_checkpoint(file.parent):
            continue
        key = os.path.normcase(os.path.abspath(file.parent))
        if key not in seen:
            seen.add(key)
            found.append(file.parent)
    return found


class _CheckOptions(click.Command):
    """Takes `mtplint check`'s options, so a hook's `args` read as a check's. Looked up when
    first parsed: lint/cli/app.py imports this module while it is itself being imported."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not any(p.name == "select" for p in self.params):
            from .check import check_cmd

            self.params += [p for p in check_cmd.params if p.name != "path"]
        return super().get_params(ctx)


@click.command("pre-commit", cls=_CheckOptions)
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
def precommit_cmd(files: tuple[Path, ...], **opts: Any) -> None:
    """Lint the checkpoint directories of the changed FILES (the pre-commit hook's entry).

    Options are `mtplint check`'s, given before the files."""
    from .check import run_check

    dirs = checkpoint_dirs(files)
    one_only = [o for o, key in (("--output", "outputs"), ("--write-baseline", "write_baseline")) if opts.get(key)]
    if one_only and len(dirs) > 1:
        click.echo(
            f"mtplint: error: pre-commit: {' and '.join(one_only)} name one file, and {len(dirs)} checkpoints "
            "changed; set them per checkpoint, or leave them out",
            err=True,
        )
        sys.exit(EXIT_BAD_INPUT)
    worst = EXIT_OK
    for directory in dirs:
        if len(dirs) > 1 and not opts.get("quiet"):
            click.echo(f"mtplint: {directory}", err=True)
        rc = run_check(directory, dict(opts))
        worst = max(worst, rc)
        if rc >= 128:  # interrupted or terminated: the user wants out, not the next checkpoint
            break
    sys.exit(worst)
