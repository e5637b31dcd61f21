"""Every fixture recipe's [expect] block, checked against what mtplint says about it: a recipe
cannot claim a load the lint contradicts.

The recipe is linted as `mtplint RECIPE` (pinned vLLM, h100, N=1, TP1; plus the recipe's own
`args`) from the recorded probe report of the case that lints it that way (tests/cases/: the
rule cases, clean.toml for official layouts, recipes.toml for the rest). A separate draft
(`target = T`) is linted as `mtplint T --draft RECIPE`, and a target of separate drafts
(`draft = D`) as `mtplint RECIPE --draft D` (tests/cases/draft.toml)."""

from __future__ import annotations

import tomllib

import pytest
from recorded_cases import PINNED_VLLM, ROOT, load_cases, recorded_path
from test_rule_cases_fast import lint_recorded

# Each recipe re-judges a rule case's lint (shared with test_rule_cases_fast in one process):
# the full tier runs it, `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

RECIPES_DIR = ROOT / "fixtures" / "recipes"
# [expect] keys this test reads; the others (catalog, vllm_error, notes) are documentation.
CHECKED = {"loads", "official", "fires", "args", "target", "draft"}


def _expectations() -> list[tuple[str, dict]]:
    found = []
    for path in sorted(RECIPES_DIR.glob("*.toml")):
        expect = tomllib.loads(path.read_text()).get("expect")
        if expect is not None:
            found.append((path.stem, expect))
    return found


EXPECTATIONS = _expectations()
CASES = load_cases()


def _default_case(recipe: str, args: list[str], expect: dict | None = None) -> dict | None:
    """The rule case that lints `recipe` with exactly `args` on the pinned vLLM (a recorded one
    first: several cases may lint a recipe the same way, each recorded on its own); a separate
    draft with its `target`, a target with its `draft`."""
    expect = expect or {}
    pair = (expect["target"], recipe) if expect.get("target") else (recipe, expect.get("draft"))
    same = [
        case
        for case in CASES
        if (case["recipe"], case.get("draft_recipe")) == pair
        and not case.get("reference_recipe")  # a comparison with a source is not the recipe's own lint
        and case["args"] == args
        and case.get("vllm", PINNED_VLLM) == PINNED_VLLM
    ]
    return next((c for c in same if recorded_path(c["id"]).is_file()), same[0] if same else None)


def test_recipes_state_what_they_expect():
    assert len(EXPECTATIONS) >= 40, "fixtures/recipes/ lost its recipes"
    for recipe, expect in EXPECTATIONS:
        assert isinstance(expect.get("loads"), bool), f"{recipe}: [expect] needs loads = true|false"
        assert not (expect.get("official") and not expect["loads"]), f"{recipe}: an official layout that fails"
        assert not (expect.get("fires") and expect["loads"]), f"{recipe}: `fires` names errors of a recipe that loads"


@pytest.mark.parametrize(("recipe", "expect"), EXPECTATIONS, ids=[r for r, _ in EXPECTATIONS])
def test_recipe_expectation(recipe: str, expect: dict):
    args = expect.get("args", [])
    case = _default_case(recipe, args, expect)
    assert case is not None, (
        f"no case lints {recipe} with args {args} on vLLM {PINNED_VLLM}: add one to tests/cases/ "
        f"(clean.toml for an official layout, recipes.toml otherwise, draft.toml for a separate draft) "
        f"and record it"
    )
    _rc, report = lint_recorded(case)
    errors = sorted({f["code"] for f in report["findings"] if f["severity"] == "error"})
    warnings = sorted({f["code"] for f in report["findings"] if f["severity"] == "warning"})
    if expect["loads"]:
        assert not errors, f"{recipe} says it loads, mtplint reports errors {errors}: " + _messages(report, "error")
    else:
        assert errors, f"{recipe} says it fails to load, mtplint reports no error (warnings: {warnings})"
    if expect.get("official"):
        assert not warnings, f"official layout {recipe} gets warnings {warnings}: " + _messages(report, "warning")
    missing = sorted(set(expect.get("fires", [])) - set(errors))
    assert not missing, f"{recipe}: expected errors {missing} did not fire; errors: {errors}"


def _messages(report: dict, severity: str) -> str:
    return "; ".join(f"{f['code']}: {f['message'][:200]}" for f in report["findings"] if f["severity"] == severity)


def test_the_check_reads_what_the_readme_documents():
    readme = (RECIPES_DIR / "README.md").read_text()
    for key in CHECKED:
        assert f"`{key}" in readme, f"fixtures/recipes/README.md does not document [expect] {key}"


def test_a_contradicted_recipe_fails():
    """The check can fail: a recipe whose lint has errors, claimed to load."""
    recipe, expect = next((r, e) for r, e in EXPECTATIONS if not e["loads"] and _default_case(r, e.get("args", []), e))
    with pytest.raises(AssertionError, match="says it loads"):
        test_recipe_expectation(recipe, {**expect, "loads": True})
