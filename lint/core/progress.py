"""Progress on stderr while a command works: one live line on a terminal, plain timed lines in
CI logs, nothing in a pipe or with -q.

On a terminal each message replaces the last in place (carriage return + erase line, cut to
the terminal's width so it never wraps) and the seconds keep counting while a long step runs;
the line is erased before anything else is printed, so a report or an error never shares a
line with it. A CI log is not a terminal and keeps every phase as its own line, with its time.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TextIO

_ERASE = "\r\x1b[K"
_live: list[Progress] = []  # the lines on screen now, erased by settle()


class Progress:
    """Callable with a message; `tick()` re-renders the current one with the time so far."""

    def __init__(self, stream: TextIO, live: bool):
        self.stream, self.live = stream, live
        self.started = time.perf_counter()
        self.current: str | None = None

    def __call__(self, msg: str) -> None:
        self.current = msg
        if self.live:
            self._render()
        else:
            self.stream.write(f"{self._stamp()} {msg}\n")
            self.stream.flush()

    def tick(self) -> None:
        if self.live and self.current is not None:
            self._render()

    def settle(self) -> None:
        """Erase the live line (nothing to do for plain lines)."""
        if self in _live:
            _live.remove(self)
            self.stream.write(_ERASE)
            self.stream.flush()

    def _stamp(self) -> str:
        return f"[{time.perf_counter() - self.started:5.1f}s]"

    def _render(self) -> None:
        width = shutil.get_terminal_size((80, 24)).columns - 1
        line = f"{self._stamp()} {self.current}"
        if len(line) > width:
            line = line[: max(width - 1, 0)] + "…"
        self.stream.write(_ERASE + line)
        self.stream.flush()
        if self not in _live:
            _live.append(self)


def settle() -> None:
    """Erase every live progress line: called before a report, an error or any other output."""
    for progress in list(_live):
        progress.settle()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def progress_reporter(quiet: bool) -> Progress | None:
    """A live line on a terminal (TERM=dumb gets plain lines: it cannot erase), plain lines in
    CI logs (not a terminal, $CI set, as GitHub Actions, GitLab CI and most others set it);
    none with -q or anywhere else (a pipe, a test)."""
    if quiet:
        return None
    tty = sys.stderr.isatty()
    if not (tty or _in_ci()):
        return None
    live = tty and os.environ.get("TERM", "") != "dumb" and not _in_ci()
    return Progress(sys.stderr, live)
