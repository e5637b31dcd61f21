"""Knowledge tables (MTP024 `options.limits`, MTP030 `options.defects`): every row is proved by a
rule case that fires it (its finding names the row) and by a case of the same checkpoint just
outside its range (another release, GPU or N) where the rule stays silent; a row missing a
column or with a severity the rule cannot give is refused when the rules load. Judged from the
recorded probe reports, like tests/checks/test_rule_cases_fast.py."""

from __future__ import annotations

import tomllib

import pytest
from mtplint.checks.known_silent_defect import DefectOptions
from paths import ROOT
from recorded_cases import load_cases
from test_rule_cases_fast import lint_recorded

TABLES = {"MTP024": "limits", "MTP030": "defects"}
# Rows no case can fire on this machine, with why (the rule file says it beside the row).
UNPROVABLE = {
    "inkling-exactly-one-speculative-token": "0.27.1's registry cannot inspect the Inkling classes on a CPU machine",
}
CASES = load_cases()


def _rows():
    for code, option in TABLES.items():
        rule = tomllib.loads((ROOT / "rules" / f"{code}.toml").read_text())
        for row in rule["options"][option]:
            yield pytest.param(code, row, id=f"{code}-{row['id']}")


def _checkpoint(case: dict) -> tuple[str, str | None]:
    return case["recipe"], case.get("draft_recipe")


@pytest.mark.parametrize(("code", "row"), list(_rows()))
def test_every_row_fires_and_has_a_silent_neighbour(code: str, row: dict) -> None:
    if row["id"] in UNPROVABLE:
        pytest.skip(UNPROVABLE[row["id"]])
    firing = []
    for case in CASES:
        if code not in case["fires"]:
            continue
        _, report = lint_recorded(case)
        if any(f["code"] == code and (f.get("evidence") or {}).get("entry") == row["id"] for f in report["findings"]):
            firing.append(case)
    assert firing, f"{code} row {row['id']!r}: no rule case fires it"
    where = {_checkpoint(c) for c in firing}
    silent = [c for c in CASES if code in c["silent"] and _checkpoint(c) in where]
    assert silent, f"{code} row {row['id']!r}: no case of {sorted(where)} outside its range keeps {code} silent"


def test_a_defect_row_without_a_column_or_with_a_foreign_severity_is_refused() -> None:
    row = {
        "id": "r",
        "vllm": "<1",
        "methods": ["dflash"],
        "sm": ">=10",
        "n": ">=1",
        "what": "w",
        "source": "s",
        "fixed_in": "1.0",
        "workaround": "x",
    }
    DefectOptions(defects=[row])
    with pytest.raises(ValueError, match=r"options\.defects entry 'r' lacks workaround"):
        DefectOptions(defects=[{k: v for k, v in row.items() if k != "workaround"}])
    with pytest.raises(ValueError, match="severity is error or warning"):
        DefectOptions(defects=[{**row, "severity": "info"}])


def test_a_row_gives_its_own_severity_and_only_inside_its_ranges() -> None:
    """The check over a real recorded deployment (DFlash on B200, vLLM 0.25.1): a row marked
    severity error (wrong output) hits as an error, an unmarked one at the rule's default (None),
    and a row whose release, GPU, N or architecture range leaves the deployment out does not hit."""
    from mtplint.checks.context import Context
    from mtplint.checks.known_silent_defect import known_silent_defect
    from mtplint.core.run_inputs import RunInputs
    from recorded_cases import recorded_report
    from test_rule_cases_fast import _inventory

    inputs, report = recorded_report("dflash-llama31-8b-b200-vllm0251")
    ctx = Context(_inventory("dflash-llama31-8b"), report, RunInputs.from_json({**inputs, "path": "draft"}))
    row = {
        "id": "r",
        "vllm": ">=0.25,<0.26",
        "methods": ["dflash"],
        "sm": ">=10.0,<11",
        "n": ">=1",
        "what": "w",
        "source": "s",
        "fixed_in": "0.26.0",
        "workaround": "x",
    }

    def hits(**changes):
        return known_silent_defect(ctx, DefectOptions(defects=[{**row, **changes}]))

    assert [(h.key, h.severity, h.basis) for h in hits()] == [("r", None, "knowledge")]
    assert [h.severity for h in hits(severity="error")] == ["error"]
    for outside in ({"vllm": ">=0.26"}, {"sm": ">=12.0,<13"}, {"n": ">=2"}, {"methods": ["dspark"]}):
        assert hits(**outside) == [], outside
    assert hits(architectures=["DeepseekV4ForCausalLM"]) == []
    assert [h.key for h in hits(architectures=["DFlashDraftModel"])] == ["r"]
