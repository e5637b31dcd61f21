"""Every rule case, checked in-process from its recorded probe report: no vLLM import.

The fixture checkpoint is built and inventoried for real; only the probe's output comes from
tests/recorded/ (`make record` refreshes it; tests/checks/test_rule_cases.py re-probes a sample and
fails on drift)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from functools import cache, lru_cache
from pathlib import Path

import pytest
from paths import ROOT
from recorded_cases import (
    PINNED_VLLM,
    assert_case,
    case_args,
    load_cases,
    recorded_path,
    recorded_report,
)

from fixtures.build import cached_build

CASES = load_cases()


@cache
def _built(recipe: str) -> Path:
    return cached_build(recipe)


@lru_cache(maxsize=4)
def _inventory(recipe: str):
    """One read per recipe and process: several cases lint each recipe, and no check changes
    an inventory (only its loader sets fields). The cases run by recipe (BY_RECIPE), so a few
    suffice: keeping all 131 held a worker at 7.3 GB (1.0 GB with four)."""
    from mtplint.inventory.checkpoint import load_inventory

    return load_inventory(_built(recipe))


def lint_recorded(case: dict) -> tuple[int, dict]:
    """`mtplint RECIPE ARGS --format json` with the recorded probe report standing in for the
    probe. Once per case and process: the recipe expectations judge the same lints (callers
    read the report, never change it)."""
    return _lint_recorded(case["id"], json.dumps(case, sort_keys=True))


@cache
def _lint_recorded(case_id: str, case_json: str) -> tuple[int, dict]:
    from mtplint.core.gc_pause import gc_paused

    with gc_paused():  # as session.lint runs it: collections re-walking the rows were 40% of the time
        linted = _lint_paused(json.loads(case_json))
        # What the lint allocated and kept (this cache, the recipe's inventory) would otherwise
        # be walked by the next collections once the collector is back on: 15 of the 62 CPU
        # seconds of every case in one process. Frozen objects are never collected; the lint's
        # garbage is acyclic (the same peak memory with and without: 7.3 GB).
        gc.freeze()
        return linted


def _lint_paused(case: dict) -> tuple[int, dict]:
    from mtplint.cli.check import check_cmd
    from mtplint.config.settings import load_settings
    from mtplint.core.findings import SEVERITY_RANK
    from mtplint.core.run_inputs import RunInputs
    from mtplint.pipeline.draft import load_draft
    from mtplint.pipeline.reference import load_reference
    from mtplint.pipeline.session import conclude
    from mtplint.probe.runner import ProbeRequest
    from mtplint.reporters.json_report import build_report

    recorded = recorded_report(case["id"])
    assert recorded is not None, f"no recorded report for {case['id']}: run `make record`"
    record_inputs, report = recorded
    path = _built(case["recipe"])
    params = dict(check_cmd.make_context("check", [str(path), *case_args(case)]).params)
    params.pop("path")
    settings = load_settings(path, params).lint
    request = ProbeRequest.replaying(report.request)
    inputs = RunInputs.from_json({**record_inputs, "path": str(path)})
    draft, reference = load_draft(settings), load_reference(settings)  # as session.lint reads them
    linted = conclude(
        path, _inventory(case["recipe"]), report, request, settings, inputs, draft=draft, reference=reference
    )
    worst = max((SEVERITY_RANK[f.severity] for f in linted.findings), default=-1)
    rc = 1 if worst >= SEVERITY_RANK[settings.fail_on] else 0
    return rc, build_report(linted.result())


# By recipe: pytest-xdist hands each worker a contiguous run of tests, so a recipe's cases
# share one inventory read (_inventory) instead of one per worker.
BY_RECIPE = sorted(CASES, key=lambda c: (c["recipe"], c.get("draft_recipe") or "", c["id"]))


@pytest.mark.parametrize("case", BY_RECIPE, ids=[c["id"] for c in BY_RECIPE])
def test_rule_case(case):
    rc, report = lint_recorded(case)
    assert_case(case, rc, report)


def test_every_rule_fires_and_stays_silent_somewhere():
    shipped = {p.stem for p in (ROOT / "rules").glob("MTP*.toml")}
    fires = {c for case in CASES for c in case["fires"]}
    silent = {c for case in CASES for c in case["silent"]}
    assert shipped, "no rules shipped"
    assert not shipped - fires, f"rules with no firing case: {sorted(shipped - fires)}"
    assert not shipped - silent, f"rules with no silent case: {sorted(shipped - silent)}"


def test_every_case_has_a_recorded_report():
    # Present is enough here: test_rule_case reads each one.
    missing = [c["id"] for c in CASES if not recorded_path(c["id"]).is_file()]
    assert not missing, f"run `make record` for: {missing}"


def test_the_fast_tier_imports_no_vllm():
    """The checks run on a recorded report without importing vLLM (compressed-tensors, which
    the inventory uses to parse its quantization configs, brings torch)."""
    # The firing case with the smallest recording: the child's time is its imports.
    case = min(
        (c for c in CASES if c.get("vllm", PINNED_VLLM) == PINNED_VLLM and c["fires"] and not c.get("draft_recipe")),
        key=lambda c: recorded_path(c["id"]).stat().st_size,
    )
    code = (
        "import json, sys; sys.path[:0] = ['tests/checks', 'tests/support', '.']\n"
        "from test_rule_cases_fast import lint_recorded\n"
        f"rc, report = lint_recorded(json.loads({json.dumps(case)!r}))\n"
        "print(json.dumps({'vllm': 'vllm' in sys.modules, "
        "'findings': len(report['findings'])}))\n"
    )
    root = ROOT
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"vllm": False, "findings": seen["findings"]} and seen["findings"] > 0
