"""Knowledge tables (MTP024 `options.limits`, MTP030 `options.defects`): every row is proved by a
rule case that fires it (its finding names the row) and by a case of the same checkpoint just
outside its range (another release, GPU or N) where the rule stays silent; a row missing a
column or with a severity the rule cannot give is refused when the rules load. Judged from the
recorded probe reports, like tests/test_rule_cases_fast.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from mtplint.checks.known_silent_defect import DefectOptions
from recorded_cases import load_cases
from test_rule_cases_fast import lint_recorded

ROOT = Path(__file__).resolve().parent.parent
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
