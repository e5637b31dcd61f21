"""SIGTERM and SIGHUP handled like Ctrl-C: inside `terminating_signals_raise()` they raise Terminated, so
finally blocks and context managers run; `signals_held()` keeps a short cleanup from being cut off."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from .errors import Terminated

_TERMINATING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def terminating_signals_raise() -> Iterator[None]:
    """Inside: SIGTERM and SIGHUP raise Terminated, so finally blocks and context managers
    run as on Ctrl-C (their default action ends the process with no cleanup at all)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_terminated) for s in _TERMINATING}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Delay SIGINT/SIGTERM/SIGHUP for a short cleanup, so that a second Ctrl-C cannot cut
    it off halfway; a signal that arrived meanwhile is delivered on the way out."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, *_TERMINATING}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
