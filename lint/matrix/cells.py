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
from ..core.probe_summary import ProbedVllm
from ..core.run_inputs import RunInputs

# Axis name -> the settings key a single lint reads it from.
AXES = {"vllm": "vllm_commit", "n": "num_speculative_tokens", "gpu": "gpu", "tp": "tensor_parallel_size"}


@dataclass
class Cell:
    vllm: ProbedVllm
    inputs: RunInputs
    axes: dict[str, Any]  # this cell's value on each axis, as given
    findings: list[Finding] = field(default_factory=list)
    cached: bool = False

    def codes(self, fail_on: str) -> list[str]:
        return sorted({f.code for f in self.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on]})


def combinations(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(axes)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(axes[n] for n in names))]


@dataclass
class Target:
    """One checkpoint of a matrix: its PATH, the settings its cells start from (its own
    mtplint.toml may describe the deployment), its axes and its inventory read once."""

    path: Path
    settings: Settings
    axes: dict[str, list[Any]]
    inventory: Any = None


@dataclass
class Unit:
    """One cell to lint: a checkpoint (index into the targets) and a combination."""

    target: int
    combo: dict[str, Any]
    settings: Settings


def units_of(targets: list[Target]) -> list[Unit]:
    """Every checkpoint x combination, checkpoint by checkpoint: the report's order."""
    return [
        Unit(i, combo, _cell_settings(t.settings, combo))
        for i, t in enumerate(targets)
        for combo in combinations(t.axes)
    ]


def provision_each_vllm(units: list[Unit], prepare: Callable[[Settings], None]) -> None:
    """Each vLLM provisioned once, one after another, before any cell runs: cells that run
    side by side never install one environment together."""
    first_of: dict[str, Settings] = {}
    for u in units:
        first_of.setdefault(str(u.combo.get("vllm")), u.settings)
    for cell_settings in first_of.values():
        prepare(cell_settings)


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
    """One checkpoint's matrix: run_catalogue of PATH alone."""
    return run_catalogue([Target(path, s, axes, inventory)], lint, progress, jobs=jobs, prepare=prepare)


def run_catalogue(
    targets: list[Target],
    lint: Callable[..., Any],
    progress: Callable[[str], None] | None = None,
    *,
    jobs: int = 1,
    prepare: Callable[[Settings], None] | None = None,
) -> list[Cell]:
    """Every checkpoint x combination on this machine. lint: session.lint (path, cell
    settings, inventory, progress). prepare: provisions one vLLM's environment; called for
    each vLLM in turn before any cell runs. A target's inventory: its PATH's, read once for
    every cell (a hub revision resolved once: a branch that moves mid-matrix cannot mix two
    commits), else its first cell's serves the rest. jobs: cells probed at once (each probe
    is one child process; one warm worker per vLLM forks them all)."""
    units = units_of(targets)
    if prepare is not None:
        provision_each_vllm(units, prepare)
    if jobs <= 1 or len(units) == 1:
        return [
            cell
            for i, t in enumerate(targets)
            for cell in _one_at_a_time(t, [u for u in units if u.target == i], lint, progress)
        ]
    return _side_by_side(targets, units, lint, progress, jobs)


def _one_at_a_time(
    t: Target, units: list[Unit], lint: Callable[..., Any], progress: Callable[[str], None] | None
) -> list[Cell]:
    cells: list[Cell] = []
    inventory = t.inventory
    settings = [u.settings for u in units]
    for u, cell_settings in zip(units, settings, strict=True):
        if progress:
            progress("cell " + label(u.combo))
        linted = lint(t.path, cell_settings, inventory, progress)
        inventory = linted.path_inventory or linted.inventory
        cells.append(cell_of(u.combo, linted))
        if cells[-1].inputs.separate_draft:  # --draft: its hub revision resolved once too
            settings = [cs.replace(draft=cells[-1].inputs.path) for cs in settings]
    return cells


def _side_by_side(
    targets: list[Target],
    units: list[Unit],
    lint: Callable[..., Any],
    progress: Callable[[str], None] | None,
    jobs: int,
) -> list[Cell]:
    """Cells on a thread pool, taken round-robin over the vLLMs so their workers start
    together. The report keeps the units' order; the first failing cell (in that order, of
    those that ran) fails the matrix, as it would one cell at a time, and no cell starts
    after a failure. Ctrl-C (or SIGTERM) kills every running probe before it propagates."""
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from ..core.signals import terminating_signals_raise
    from ..probe.runner import end_running_probes

    order = round_robin(units)
    say = _serialized(progress)
    several = len(targets) > 1

    def one(i: int) -> Any:
        u = units[i]
        t = targets[u.target]
        name = (f"{t.path} " if several else "") + label(u.combo)
        return lint(t.path, u.settings, t.inventory, (lambda msg: say(f"[{name}] {msg}")) if say else None)

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
    return [cell_of(units[i].combo, futures[i].result()) for i in range(len(units))]


def round_robin(units: list[Unit]) -> list[int]:
    """The units' indices taken in turn from each vLLM's (so their workers start together)."""
    groups: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        groups.setdefault(str(u.combo.get("vllm")), []).append(i)
    return [i for round_ in itertools.zip_longest(*groups.values()) for i in round_ if i is not None]


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


def label(combo: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in combo.items() if v is not None)


def cell_of(combo: dict[str, Any], linted: Any) -> Cell:
    result = linted.result()
    return Cell(
        vllm=result.vllm,
        inputs=result.inputs,
        axes=combo,
        findings=list(result.findings),
        cached=result.probe is not None and result.probe.cached,
    )


def works_on(cells: list[Cell], fail_on: str) -> str:
    """Which probed vLLMs load and draft correctly in every cell: 'vLLM >= X' when those are
    the newest ones, else the list."""
    by_version: dict[str, bool] = {}
    for c in cells:
        v = str(c.vllm.version)
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
