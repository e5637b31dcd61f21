"""`mtplint twin PATH OUT` (registered by cli.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..core.exit_guard import guarded


@click.command("twin")
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--debug", is_flag=True, help="Tracebacks on errors.")
def twin_cmd(path: Path, out: Path, debug: bool) -> None:
    """Write a tiny real-weight twin of the checkpoint at PATH into OUT (a CPU vLLM can serve it
    with MTP: a correctly wired draft accepts every token, a broken one none)."""

    def run() -> int:
        from ..core.textsafe import terminal_safe
        from .build import build
        from .encode import Unsupported
        from .shrink import TwinLimit

        try:
            t = build(path, out)
        except (Unsupported, TwinLimit) as exc:
            # The twin's own limit: named, and not blamed on the checkpoint (exit 3, not 2).
            click.echo(
                terminal_safe(f"mtplint: {path}: no twin: {exc} (a limit of the twin, not a fault of the checkpoint)"),
                err=True,
            )
            return 3
        click.echo(f"{t.path}: {t.tensors} tensors, token {t.token}, built in {t.seconds:.1f} s")
        if t.note:
            click.echo(f"{t.path}: {t.note}")
        return 0

    sys.exit(guarded(run, debug))
