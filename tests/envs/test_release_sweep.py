"""Every vLLM minor release line mtplint's table holds (0.10 ... the pinned one) probes: one
lint per line (its newest release in the table) of DeepSeek-V3 FP8 as published, each release
provisioned on first use into the environment store, plus the releases issue #27 was filed
on (0.10.2, 0.11.0) on the DeepSeek-V3 and Qwen3-Next official layouts.

The whole sweep (~24 provisionings, ~1.3 GB each) does not fit CI's budget: `make test` runs
a rotating sample of two lines (which two follows the date; a failure names its release in
the test id), `make test-sweep` (MTPLINT_SWEEP=all) runs every line, and MTPLINT_SWEEP=0.17,0.22
runs the lines named."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys

import pytest
from mtplint.envs import releases

from fixtures.build import cached_build

pytestmark = pytest.mark.probe
MTPLINT = [sys.executable, "-m", "mtplint"]


def newest_per_minor() -> dict[str, str]:
    lines: dict[str, str] = {}
    for version in sorted(releases.table(), key=releases._key):
        lines[".".join(version.split(".")[:2])] = version
    return lines


def chosen_lines() -> list[str]:
    lines = list(newest_per_minor())
    wanted = os.environ.get("MTPLINT_SWEEP", "").strip()
    if wanted == "all":
        return lines
    if wanted:
        return [x.strip() for x in wanted.split(",") if x.strip()]
    day = datetime.date.today().toordinal()
    return sorted({lines[(2 * day) % len(lines)], lines[(2 * day + 1) % len(lines)]}, key=lines.index)


def lint(recipe: str, version: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [*MTPLINT, str(cached_build(recipe)), "--vllm-commit", version, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode in (0, 1), f"vLLM {version}, {recipe}: exit {proc.returncode}: {proc.stderr[-3000:]}"
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def assert_built(report: dict, version: str) -> None:
    assert report["vllm"]["version"] == version
    failed = [f["message"] for f in report["findings"] if f["code"] == "MTP009"]
    assert not failed, f"vLLM {version} did not build the models: {failed}"


@pytest.mark.parametrize("line", chosen_lines())
def test_each_minor_release_line_probes_deepseek_v3(line):
    version = newest_per_minor()[line]
    rc, report, _ = lint("dsv3-fp8-official", version)
    assert_built(report, version)
    # As published, the checkpoint loads with MTP on every release: no error-level finding.
    assert [f["message"] for f in report["findings"] if f["severity"] == "error"] == []
    assert rc == 0


@pytest.mark.parametrize("version", ["0.10.2", "0.11.0"])
@pytest.mark.parametrize("recipe", ["dsv3-fp8-official", "qwen3-next-bf16-official"])
def test_the_oldest_lines_give_verdicts_on_official_layouts(version, recipe):
    """Issue #27: these exited 3 (a native-op stand-in in a custom op's default argument)."""
    rc, report, _ = lint(recipe, version)
    assert_built(report, version)
    assert rc == 0, [f["message"] for f in report["findings"]]
