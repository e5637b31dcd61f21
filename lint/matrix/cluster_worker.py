"""What runs on a Ray node for `mtplint matrix --cluster`: one actor per node and vLLM (and per
whether its cells read the hub), holding that vLLM's provisioned environment and, through the
probe-worker machinery, one warm probe worker that forks each cell's probe. Imported by Ray's
worker processes: it must import nothing of Ray at module level (the driver pickles the class
by reference)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from ..config.schema import Settings
from ..core.errors import MtplintError
from .cells import Cell


class CellRunner:
    """Lints cells of one vLLM on this node. cwd: the driver's working directory, entered when
        this node has it (storage the nodes share): relative PATHs and settings resolve as they
        did where the matrix was started. secrets: what its cells need from the driver's environment
    (cluster._secrets)."""

    def __init__(self, cwd: str, secrets: dict[str, str]) -> None:
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        os.environ.update(secrets)  # this process's own: probe children never get them (launch_env)
        if os.path.isdir(cwd):
            os.chdir(cwd)
        self._provisioned = threading.Lock()
        self._ready = False

    def where(self) -> dict[str, Any]:
        import socket

        return {"host": socket.gethostname(), "pid": os.getpid()}

    def lint_cell(self, path: str, s: Settings, combo: dict[str, Any]) -> dict[str, Any]:
        """{"cell": Cell, "seconds", "pid"} or {"error": {type, message, path, exit_code}}: a cell's
        own failure (bad input, a probe failure) travels as data, so the driver tells it from a
        worker or node that died (a Ray error: the cell is retried elsewhere)."""
        from ..pipeline.session import lint, provision
        from .cells import cell_of

        started = time.perf_counter()
        try:
            with self._provisioned:  # the first cell provisions this vLLM; the others wait for it
                if not self._ready:
                    provision(s)
                    self._ready = True
            linted = lint(Path(path), s, progress=None, inventory=None)
            cell: Cell = cell_of(combo, linted)
        except MtplintError as exc:
            return {
                "error": {
                    "type": type(exc).__name__,
                    "message": str(exc),
                    "path": exc.path,
                    "exit_code": exc.exit_code,
                }
            }
        return {"cell": cell, "seconds": time.perf_counter() - started, "pid": os.getpid()}
