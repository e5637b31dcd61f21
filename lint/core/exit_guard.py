"""A command body's one-line errors and documented exit codes (see lint/core/errors.py)."""

from __future__ import annotations

import signal
import traceback
from collections.abc import Callable

import click

from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, MtplintError, Terminated


def guarded(run: Callable[[], int], debug: bool, echo: Callable[[str], None] | None = None) -> int:
    """Run a command body: MtplintError -> one line and its exit code; Ctrl-C -> exit 130,
    SIGTERM/SIGHUP -> 128 + the signal (after the probe's processes and files are gone);
    anything else is an mtplint bug -> one line and exit 3. Tracebacks only with --debug.
    echo: where those lines go (stderr by default; `mtplint check A B` also keeps them for
    its report)."""
    from .progress import settle
    from .signals import terminating_signals_raise

    say = echo or _stderr

    try:
        with terminating_signals_raise():
            try:
                return run()
            finally:
                settle()  # a live progress line is erased before the error line below
    except MtplintError as exc:
        hint = " (rerun with --debug for the probe's output)" if exc.detail and not debug else ""
        say(f"mtplint: error: {exc.one_line()}{hint}")
        if exc.detail and debug:
            say(exc.detail)
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except KeyboardInterrupt:
        say("mtplint: interrupted")
        return EXIT_INTERRUPTED
    except Terminated as exc:
        say(f"mtplint: terminated by {signal.Signals(exc.signum).name}")
        return exc.exit_code
    except Exception as exc:
        say(f"mtplint: internal error: {type(exc).__name__}: {exc} (rerun with --debug)")
        if debug:
            traceback.print_exc()
        return EXIT_INTERNAL


def _stderr(line: str) -> None:
    click.echo(line, err=True)
