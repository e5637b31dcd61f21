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
        from .build import build
        from .encode import Unsupported

        try:
            t = build(path, out)
        except Unsupported as exc:
            from ..core.errors import BadInput

            raise BadInput(f"{path}: cannot twin: {exc}") from None
        click.echo(f"{t.path}: {t.tensors} tensors, token {t.token}, built in {t.seconds:.1f} s")
        return 0

    sys.exit(guarded(run, debug))
