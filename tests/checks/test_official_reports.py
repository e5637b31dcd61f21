"""An official layout's recorded probe report holds nothing vLLM raised.

`mtplint verify` and the engine-agreement table read the lint's verdict as "start-up error" as
soon as the probe recorded any raise (verify.verdict.raised), findings or not. A raise on a
layout whose case says it lints clean is the probe replaying vLLM wrongly: Step-3.5-Flash's
wiring was replayed with the base proposer's head sharing (AttributeError: 'Step3p5MTP' object
has no attribute 'lm_head') where vLLM's model runner builds Step3p5MTPProposer, whose MTP
layers keep the heads they loaded.
"""

from __future__ import annotations

import pytest
from recorded_cases import load_cases, read_recorded

CLEAN = [c for c in load_cases() if not c.get("fires") and c.get("max_errors") == 0]


@pytest.mark.parametrize("case", CLEAN, ids=[c["id"] for c in CLEAN])
def test_an_official_layout_records_no_raise(case):
    from mtplint.probe.report import ProbeReport
    from mtplint.verify.verdict import raised

    recorded = read_recorded(case["id"])
    if recorded is None:
        pytest.skip("no recording")
    assert raised(ProbeReport.from_json(recorded["report"])) is None


def test_step35_mtp_wiring_is_its_own_proposers():
    from mtplint.probe.report import ProbeReport

    report = ProbeReport.from_json(read_recorded("step3p5-bf16-official")["report"])
    assert report.wiring is not None
    assert report.wiring.proposer.endswith("Step3p5MTPProposer"), report.wiring.proposer
    assert report.wiring.errors == []
