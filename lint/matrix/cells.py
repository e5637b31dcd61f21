"""The cells of a matrix: one single lint per combination, through the same pipeline and
probe cache as `mtplint PATH` (a repeated cell costs no probe)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..findings import SEVERITY_RANK, Finding

# Axis name -> the settings key a single lint reads it from.
AXES = {"vllm": "vllm_commit", "n": "num_speculative_tokens", "gpu": "gpu", "tp": "tensor_parallel_size"}


@dataclass
class Cell:
    vllm: dict[str, Any]
    inputs: dict[str, Any]
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
    s: dict[str, Any],
    axes: dict[str, list[Any]],
    lint: Callable[..., Any],
    progress: Callable[[str], None] | None = None,
) -> list[Cell]:
    """lint: session.lint. Cells run vLLM by vLLM, so one environment is provisioned once
    and its cells follow each other. The first cell's inventory serves the others: a hub
    revision is resolved once, so every cell lints the same commit (a branch that moves
    mid-matrix cannot mix two) and the later cells cost the hub no request."""
    cells = []
    inventory = None
    for combo in combinations(axes):
        cell_settings = dict(s)
        for axis, value in combo.items():
            if value is not None:
                cell_settings[AXES[axis]] = value
        if progress:
            progress("cell " + " ".join(f"{k}={v}" for k, v in combo.items() if v is not None))
        linted = lint(path, cell_settings, inventory)
        inventory = linted.path_inventory or linted.inventory
        result = linted.result()
        if "target" in result.inputs:
            s = {**s, "draft": result.inputs["path"]}  # --draft: its hub revision resolved once too
        cells.append(
            Cell(
                vllm=dict(result.vllm),
                inputs=dict(result.inputs),
                axes=combo,
                findings=list(result.findings),
                cached=bool(result.probe.get("cached")),
            )
        )
    return cells


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
