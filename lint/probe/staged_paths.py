"""vLLM reads copies of the checkpoints staged in the probe's temporary directory, so the
messages it raises name those copies (`/tmp/mtplint-probe-x/config does not appear to have a
file named configuration_mimo.py`). A report names the checkpoints as the user gave them: the
staged directories become placeholders before the report is cached (a cached report serves
the same bytes at any path) and the user's paths on the way out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .report import ErrorRecord, ProbeReport

TARGET = "<checkpoint>"
DRAFT = "<draft checkpoint>"
# What runner._stage names the staged copies, under the probe's temporary directory.
STAGED = {"config": TARGET, "draft_config": DRAFT}


def _errors(report: ProbeReport) -> Iterator[ErrorRecord]:
    if report.config_error is not None:
        yield report.config_error
    yield from report.construction_errors.values()
    for load in report.load.values():
        yield from load.errors
        if load.completeness_error is not None:
            yield load.completeness_error
    if report.wiring is not None:
        yield from report.wiring.errors


def _replace(report: ProbeReport, pairs: list[tuple[str, str]]) -> None:
    def swap(text: str) -> str:
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    for err in _errors(report):
        err.message = swap(err.message)
    report.serve_args_rejected = swap(report.serve_args_rejected)


def to_placeholders(report: ProbeReport, tmp: Path) -> None:
    _replace(report, [(str(tmp / name), placeholder) for name, placeholder in STAGED.items()])


def to_user_paths(report: ProbeReport, target: str, draft: str | None) -> None:
    _replace(report, [(TARGET, target), *([(DRAFT, draft)] if draft else [])])
