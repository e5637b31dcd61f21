"""The lint's verdict as an engine outcome it predicts, and whether the engine agrees.

start-up-error  the probe saw vLLM raise (config, construction, load, completeness, wiring):
                the engine must fail to start
silent-failure  error findings, nothing raised: the engine starts and drafts wrong (acceptance 0)
clean           no error findings: the engine starts and drafts right (acceptance 1)

A checkpoint served as it is whose weights are not the acceptance construction (a trained or a
randomly initialised model) drafts as well as its own weights do: its acceptance is the draft's
quality, not a verdict on the wiring: even a draft that reproduces the target (acceptance 1.0)
may route around the very modules vLLM loaded wrong (measured: a hand-built GLM-4.5 whose MTP
block's output projections are zero drafts at 1.00 or 0.00 from run to run with that block's
Linears BF16 under a W8A8 config that does not exclude them, their scales never loaded; the
construction, which runs them, drafts at 0.00 every time). verify
then serves the same layout holding the construction and judges by that; where it cannot, the
engine confirms start-up only (`started`), which the lint's clean and silent-failure verdicts
both predict.
"""

from __future__ import annotations

from typing import Any

from .engine_run import Outcome

RIGHT, WRONG = 0.99, 0.01  # the construction gives exactly 1.0 or 0.0; anything between is neither


def raised(report: Any) -> str | None:
    """What the probe saw vLLM raise, in one line, or None."""
    if report.config_error is not None:
        return f"config: {report.config_error.type}"
    for model, err in report.construction_errors.items():
        return f"{model} construction: {err.type}"
    for model in ("target", "draft"):
        load = report.load.get(model)
        if load is None:
            continue
        if load.errors:
            return f"{model} load: {load.errors[0].type}: {load.errors[0].message[:120]}"
        if load.completeness_error is not None:
            return f"{model} completeness: {load.completeness_error.type}: {load.completeness_error.message[:120]}"
    if report.wiring is not None and report.wiring.errors:
        return f"wiring: {report.wiring.errors[0].type}"
    return None


def lint_verdict(report: Any, errors: int) -> str:
    """errors: the lint's error findings (consequences included)."""
    if raised(report):
        return "start-up-error"
    return "silent-failure" if errors else "clean"


STARTED = "started"  # started and drafted; the drafts not judged (the checkpoint's own weights)


def engine_verdict(out: Outcome, *, judge_drafts: bool = True) -> str:
    if out.load != "ok":
        return "start-up-error"
    if not judge_drafts:
        return STARTED
    acc = out.acceptance
    if acc is None:
        return "no-drafts"
    if acc >= RIGHT:
        return "clean"
    if acc <= WRONG:
        return "silent-failure"
    return "partial"


def agree(lint: str, engine: str) -> bool:
    if engine == STARTED:
        return lint != "start-up-error"
    return lint == engine
