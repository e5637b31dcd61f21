"""The cells of a matrix: one single lint per combination, through the same pipeline and
probe cache as `mtplint PATH` (a repeated cell costs no probe)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.schema import Settings
from ..core.findings import SEVERITY_RANK, Finding
from ..core.run_inputs import RunInputs

# Axis name -> the settings key a single lint reads it from.
AXES = {"vllm": "vllm_commit", "n": "num_speculative_tokens", "gpu": "gpu", "tp": "tensor_parallel_size"}


@dataclass
class Cell:
    vllm: dict[str, Any]
    inputs: RunInputs
    axes: dict[str, Any]  # this cell's value on each axis, as given
    findings: list[Finding] = field(default_factory=list)
    cached: bool = False

    def codes(self, fail_on: str) -> list[str]:
        return sorted({f.code for f in self.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on]})


def combinations(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(axes)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(axes[n] for n in names))]


def run_matrix(
    path: Path,
    s: Settings,
    axes: dict[str, list[Any]],
    lint: Callable[..., Any],
    progress: Callable[[str], None] | None = None,
    *,
    jobs: int = 1,
    prepare: Callable[[Settings], None] | None = None,
    inventory: Any = None,
) -> list[Cell]:
    """lint: session.lint (path, cell settings, inventory, progress). prepare: provisions one vLLM's
    environment; called for each vLLM in turn before any cell runs, so cells that run side by
    side never install one environment together. inventory: PATH's, read once for every cell
    (a hub revision resolved once: a branch that moves mid-matrix cannot mix two commits),
    else the first cell's serves the rest. jobs: cells probed at once (each probe is one
    child process; one warm worker per vLLM forks them all)."""
    combos = combinations(axes)
    settings = [_cell_settings(s, combo) for combo in combos]
    if prepare is not None:
        first_of: dict[str, Settings] = {}
        for combo, cell_settings in zip(combos, settings, strict=True):
            first_of.setdefault(str(combo.get("vllm")), cell_settings)
        for cell_settings in first_of.values():
            prepare(cell_settings)
    if jobs <= 1 or len(combos) == 1:
        cells = []
        for combo, cell_settings in zip(combos, settings, strict=True):
            if progress:
                progress("cell " + _label(combo))
            linted = lint(path, cell_settings, inventory, progress)
            inventory = linted.path_inventory or linted.inventory
            cells.append(_cell(combo, linted))
            if cells[-1].inputs.separate_draft:  # --draft: its hub revision resolved once too
                settings = [cs.replace(draft=cells[-1].inputs.path) for cs in settings]
        return cells
    return _side_by_side(path, combos, settings, lint, progress, jobs, inventory)


def _side_by_side(
    path: Path,
    combos: list[dict[str, Any]],
    settings: list[Settings],
    lint: Callable[..., Any],
    progress: Callable[[str], None] | None,
    jobs: int,
    inventory: Any,
) -> list[Cell]:
    """Cells on a thread pool, taken round-robin over the vLLMs so their workers start
    together. The report keeps the combinations' order; the first failing cell (in that
    order, of those that ran) fails the matrix, as it would one cell at a time, and no cell
    starts after a failure. Ctrl-C (or SIGTERM) kills every running probe before it
    propagates."""
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from ..core.signals import terminating_signals_raise
    from ..probe.runner import end_running_probes

    groups: dict[str, list[int]] = {}
    for i, combo in enumerate(combos):
        groups.setdefault(str(combo.get("vllm")), []).append(i)
    order = [i for round_ in itertools.zip_longest(*groups.values()) for i in round_ if i is not None]
    say = _serialized(progress)

    def one(i: int) -> Any:
        label = _label(combos[i])
        return lint(path, settings[i], inventory, (lambda msg: say(f"[{label}] {msg}")) if say else None)

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="mtplint-cell")
    # At most `jobs` cells submitted at a time, the next only once one ends without an error:
    # after a failure no cell starts (the pool's own queue would start the next at once).
    futures: dict[int, Future] = {}
    waiting = list(order)
    try:
        with terminating_signals_raise():
            while waiting or any(not f.done() for f in futures.values()):
                while waiting and sum(not f.done() for f in futures.values()) < jobs:
                    if any(f.done() and f.exception() is not None for f in futures.values()):
                        waiting.clear()  # those running finish: an earlier cell's failure still wins
                        break
                    i = waiting.pop(0)
                    futures[i] = pool.submit(one, i)
                wait([f for f in futures.values() if not f.done()], return_when=FIRST_COMPLETED)
    except BaseException:
        end_running_probes()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    failed = next((futures[i].exception() for i in sorted(futures) if futures[i].exception() is not None), None)
    if failed is not None:
        raise failed
    return [_cell(combos[i], futures[i].result()) for i in range(len(combos))]


def _serialized(progress: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """One progress line at a time from several cells (no live seconds: whose would they be)."""
    if progress is None:
        return None
    lock = threading.Lock()

    def say(msg: str) -> None:
        with lock:
            progress(msg)

    return say


def _cell_settings(s: Settings, combo: dict[str, Any]) -> Settings:
    return s.replace(**{AXES[axis]: value for axis, value in combo.items() if value is not None})


def _label(combo: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in combo.items() if v is not None)


def _cell(combo: dict[str, Any], linted: Any) -> Cell:
    result = linted.result()
    return Cell(
        vllm=dict(result.vllm),
        inputs=result.inputs,
        axes=combo,
        findings=list(result.findings),
        cached=bool(result.probe.get("cached")),
    )


def works_on(cells: list[Cell], fail_on: str) -> str:
    """Which probed vLLMs load and draft correctly in every cell: 'vLLM >= X' when those are
    the newest ones, else the list."""
    by_version: dict[str, bool] = {}
    for c in cells:
        v = str(c.vllm.get("version"))
        by_version[v] = by_version.get(v, True) and not c.codes(fail_on)
    ordered = sorted(by_version, key=version_key)
    good = [v for v in ordered if by_version[v]]
    if not good:
        return "works on none of the probed vLLMs"
    if len(good) == len(ordered):
        return f"works on every probed vLLM ({', '.join(ordered)})"
    if ordered[-len(good) :] == good:
        return f"works on vLLM >= {good[0]} (of {', '.join(ordered)})"
    return f"works on vLLM {', '.join(good)} (of {', '.join(ordered)})"


def version_key(version: Any) -> Any:
    """Oldest first; a version PEP 440 cannot read sorts last."""
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(str(version).split("+")[0]))
    except InvalidVersion:
        return (1, str(version))
