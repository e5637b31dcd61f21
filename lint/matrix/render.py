"""A matrix as text (a table: rows vLLM, columns the other axes), JSON and JUnit."""

from __future__ import annotations

import json
from typing import Any

from ..core.textsafe import json_safe, terminal_safe
from ..core.versions import __version__
from ..reporters.common import jsonable
from .cells import Cell, version_key, works_on

SCHEMA_ID = "mtplint/matrix/v1"


def _vllm_label(c: Cell) -> str:
    v = c.vllm
    return f"{v.version}" + (f" ({v.commit})" if v.commit else "")


def _column(c: Cell) -> str:
    return " ".join(f"{k}={v}" for k, v in c.axes.items() if k != "vllm" and v is not None) or "default"


def checkpoint_of(c: Cell) -> str:
    return c.inputs.path


def by_checkpoint(cells: list[Cell]) -> dict[str, list[Cell]]:
    """The cells of each checkpoint, in the order the checkpoints came."""
    groups: dict[str, list[Cell]] = {}
    for c in cells:
        groups.setdefault(checkpoint_of(c), []).append(c)
    return groups


def render_text(cells: list[Cell], fail_on: str) -> str:
    """One checkpoint: its table and verdict. Several: a table and verdict under each one's
    path, in the order they were given."""
    groups = by_checkpoint(cells)
    if len(groups) <= 1:
        return _table(cells, fail_on)
    return "\n".join(f"{terminal_safe(path)}\n{_table(group, fail_on)}" for path, group in groups.items())


def _table(cells: list[Cell], fail_on: str) -> str:
    cells = sorted(cells, key=lambda c: version_key(c.vllm.version))  # stable: columns keep their order
    # Labels carry names from the command line and the probed vLLM: escaped per cell.
    rows = list(dict.fromkeys(terminal_safe(_vllm_label(c)) for c in cells))
    cols = list(dict.fromkeys(terminal_safe(_column(c)) for c in cells))
    grid = {
        (terminal_safe(_vllm_label(c)), terminal_safe(_column(c))): " ".join(c.codes(fail_on)) or "clean" for c in cells
    }
    head = ["vLLM", *cols]
    table = [[r, *(grid.get((r, col), "-") for col in cols)] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *table, strict=True)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip() for line in [head, *table]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += ["", f"{works_on(cells, fail_on)} (cells list findings at or above {fail_on})"]
    return "\n".join(lines) + "\n"


def build_json(cells: list[Cell], fail_on: str) -> dict[str, Any]:
    doc = {
        "schema": SCHEMA_ID,
        "mtplint": __version__,
        "fail_on": fail_on,
        "works_on": works_on(cells, fail_on),
        # Each checkpoint's own verdict (a catalogue: `mtplint matrix A B ...`); its cells name
        # it in inputs.path.
        "checkpoints": [
            {"path": path, "works_on": works_on(group, fail_on)} for path, group in by_checkpoint(cells).items()
        ],
        "cells": [
            {
                "vllm": {"version": c.vllm.version, "commit": c.vllm.commit},
                "inputs": c.inputs.to_json(),
                "findings": [f.to_dict() for f in c.findings],
                "probe": {"cached": c.cached},
            }
            for c in cells
        ],
    }
    return json.loads(json.dumps(doc, default=jsonable))


def render_json(cells: list[Cell], fail_on: str) -> str:
    return json_safe(json.dumps(build_json(cells, fail_on), indent=2, ensure_ascii=False)) + "\n"


def render_junit(cells: list[Cell], fail_on: str) -> str:
    from junit_xml import TestCase, TestSuite, to_xml_report_string

    suites = []
    several = len(by_checkpoint(cells)) > 1
    for label in dict.fromkeys(_vllm_label(c) for c in cells):
        cases = []
        for c in (c for c in cells if _vllm_label(c) == label):
            name = f"{checkpoint_of(c)} {_column(c)}" if several else _column(c)
            case = TestCase(name=terminal_safe(name), classname=terminal_safe(f"vllm {label}"))
            codes = c.codes(fail_on)
            if codes:
                failing = [f for f in c.findings if f.code in codes]
                case.add_failure_info(
                    message=terminal_safe(" ".join(codes)),
                    output=terminal_safe("\n".join(f"{f.code} {f.message}" for f in failing)),
                )
            cases.append(case)
        suites.append(TestSuite(name=terminal_safe(f"vllm {label}"), test_cases=cases))
    return to_xml_report_string(suites, encoding="utf-8")


RENDERERS = {"text": render_text, "json": render_json, "junit": render_junit}
