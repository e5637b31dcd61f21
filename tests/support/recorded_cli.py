"""The real `mtplint` command line, in-process, with rule cases' recorded probe reports
standing in for the vLLM child: settings, inventory, probe cache, rule checks, suppressions,
reporters and exit codes all run for real, and no vLLM is imported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from recorded_cases import load_cases, read_recorded

from fixtures.build import cached_build


def case_checkpoint(case_id: str) -> Path:
    """The fixture checkpoint a rule case lints (built once per recipe, shared: read-only)."""
    recipe = next(c["recipe"] for c in load_cases() if c["id"] == case_id)
    return cached_build(recipe)


def stand_in(monkeypatch: pytest.MonkeyPatch, cases: dict[Path, str], cache_dir: Path) -> list[Path]:
    """Make the probe child answer with the recorded report of the case mapped to the
    checkpoint it is asked about, with the probe cache in `cache_dir`. Returns the list of
    checkpoints the child was started for, so a test can assert that none was (usage errors
    and unreadable inputs come before the probe)."""
    from mtplint.probe import runner
    from mtplint.probe.report import ProbeReport

    by_root = {os.path.realpath(p): case_id for p, case_id in cases.items()}
    probed: list[Path] = []

    def child(inventory, request, tmp, progress):
        root = os.path.realpath(inventory.root)
        assert root in by_root, f"no recorded case stands in for {root}"
        record = read_recorded(by_root[root])
        assert record is not None, f"no recorded report for {by_root[root]}: run `make record`"
        probed.append(Path(inventory.root))
        return ProbeReport.from_json(record["report"])

    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(runner, "_run_child", child)
    return probed


def mtplint(*argv: object) -> int:
    """`mtplint ARGV` through the console script's entry; its exit code (output: capsys)."""
    from mtplint.cli.app import cli_entry

    return cli_entry([str(a) for a in argv])
