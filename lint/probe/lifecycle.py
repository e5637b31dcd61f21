"""The probe child's life is bounded by mtplint's: on every way out the parent kills the
child's process group, a child whose parent died kills itself, and a temp directory left
by a parent that could not clean up (SIGKILL) is removed by the next run.

The child runs in its own session (start_new_session) so that a Ctrl-C in the terminal
reaches only mtplint, which then ends the child's whole group and removes its files, and
so that one killpg reaches whatever the child started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from ..core.signals import signals_held

TEMP_PREFIX = "mtplint-probe-"
_OWNER_FILE = "owner"


def end_group(proc: object) -> None:
    """Kill the child's process group and reap the child. Safe on every path: the child may
    have exited already (its group may still hold processes it started)."""
    pid = proc.pid  # type: ignore[attr-defined]
    with signals_held():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait()  # type: ignore[attr-defined]


# --- the temp directory's owner, for the next run's sweep -------------------------------


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), which tells a live owner
    from a later process that reuses its pid; None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def mark_owner(tmp: Path) -> None:
    (tmp / _OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid()) or '-'}\n")


def _owner_alive(tmp: Path) -> bool:
    try:
        pid_text, started = (tmp / _OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return True  # no readable mark (a run that is just starting): not ours to judge
    return _alive(pid, None if started == "-" else started)


def sweep_stale(parent: Path, keep: Path | None = None) -> list[Path]:
    """Remove probe temp directories whose mtplint is gone (it was SIGKILLed, so it could
    not remove its own); returns what was removed."""
    removed = []
    with contextlib.suppress(OSError):
        for d in parent.glob(TEMP_PREFIX + "*"):
            if d == keep or not d.is_dir() or d.is_symlink():
                continue
            with contextlib.suppress(OSError):
                if d.stat().st_uid != os.getuid():
                    continue
            if not _owner_alive(d):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
    return removed


# --- in the child --------------------------------------------------------------------


PARENT_ENV = "MTPLINT_PROBE_PARENT"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Called first thing in the probe child: when mtplint dies, even by SIGKILL, so does the
    child (it runs in its own session, so no terminal signal reaches it). Linux: the kernel's
    parent-death signal (sent when the thread that forked the child exits; mtplint forks from
    its main thread). Everywhere: a thread that polls the parent pid, which also covers the
    instant between fork and prctl."""
    expected = int(os.environ.get(PARENT_ENV) or 0) or os.getppid()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != expected:
        _kill_own_group()
    threading.Thread(target=_watch_parent, args=(expected,), name="mtplint-parent-watch", daemon=True).start()


def die_with_client(client: int) -> None:
    """The same bound for a probe a worker forked for mtplint process `client`: the kernel's
    parent-death signal covers the worker, a thread that polls `client` (its start time too,
    so a reused pid does not keep the probe alive) covers mtplint."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    started = _start_time(client)
    if not _alive(client, started):
        _kill_own_group()
    threading.Thread(target=_watch_client, args=(client, started), name="mtplint-client-watch", daemon=True).start()


def _alive(pid: int, started: str | None) -> bool:
    """`pid` runs, and is the process that started at `started` (not a later one reusing the
    pid); None: no start time to compare."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return started is None or _start_time(pid) in (None, started)


def _watch_client(client: int, started: str | None) -> None:
    while True:
        time.sleep(1.0)
        if not _alive(client, started):
            _kill_own_group()


def _watch_parent(expected: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != expected:
            _kill_own_group()


def _kill_own_group() -> None:
    if os.getpgrp() == os.getpid():  # the group is the probe's own, not a caller's
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(137)
