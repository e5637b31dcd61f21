"""The probe's phases as they happen, for the parent's progress line.

The child appends one JSON line per phase to the file the parent names in
MTPLINT_PROBE_PHASES; the parent reads what is new each time it checks the child's deadline.
A file, not a pipe: the child can never block on a parent that is not reading, and a
crashed child leaves whole lines behind. Imported by the child: nothing beyond the stdlib.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

ENV = "MTPLINT_PROBE_PHASES"
_STARTED = time.perf_counter()


def restart_clock() -> None:
    """Times from now (a probe forked by a worker: not from the worker's start)."""
    global _STARTED
    _STARTED = time.perf_counter()


def emit(what: str) -> None:
    """Say the child is now doing `what` (no-op outside a probe child)."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"phase": what, "t": round(time.perf_counter() - _STARTED, 2)}) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
    except OSError:
        pass  # progress is a courtesy: never a reason for the probe to fail


class Reader:
    """The parent's side: the phases written since the last call."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def new(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self.offset += len(complete)
        out = []
        for raw in complete.splitlines():
            try:
                out.append(str(json.loads(raw)["phase"]))
            except (ValueError, KeyError, TypeError):
                continue
        return out
