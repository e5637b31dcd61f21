"""`mtplint twin PATH OUT` (registered by cli.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..core.errors import EXIT_FINDINGS
from ..core.exit_guard import guarded

# A twin the twin cannot build is neither bad input (the checkpoint is fine) nor an mtplint
# failure: it is a result, "no twin, because ...", and exits 1 like a negative lint verdict.
EXIT_NO_TWIN = EXIT_FINDINGS


@click.command(
    "twin",
    epilog="Exit codes: 0 twin written; 1 no twin (the twin's or the engine's limit, named in one line); "
    "2 bad input (PATH, OUT); 3 internal failure.",
)
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--debug", is_flag=True, help="Tracebacks on errors.")
def twin_cmd(path: Path, out: Path, debug: bool) -> None:
    """Write a tiny real-weight twin of the checkpoint at PATH into OUT (a CPU vLLM can serve it
    with MTP: a correctly wired draft accepts every token, a broken one none). Where the twin
    cannot be built it says why in one line and exits 1: a limit of the twin, not a fault of
    the checkpoint."""

    def run() -> int:
        from ..core.textsafe import terminal_safe
        from .build import build
        from .encode import Unsupported
        from .shrink import TwinLimit

        try:
            t = build(path, out)
        except (Unsupported, TwinLimit) as exc:
            click.echo(
                terminal_safe(f"mtplint: {path}: no twin: {exc} (a limit of the twin, not a fault of the checkpoint)"),
                err=True,
            )
            return EXIT_NO_TWIN
        click.echo(f"{t.path}: {t.tensors} tensors, token {t.token}, built in {t.seconds:.1f} s")
        if t.note:
            click.echo(f"{t.path}: {t.note}")
        return 0

    sys.exit(guarded(run, debug))
