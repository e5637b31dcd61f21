"""Write the README's family table (every MTP family the pinned vLLM ships, and what the
fixtures prove about it) from fixtures/families/index.toml, the recipes, the rule cases and
their recorded probe reports.

    python scripts/gen_family_table.py           # rewrite the table between the markers in README.md
    python scripts/gen_family_table.py --check   # exit 1 when the committed table is out of date

tests/checks/test_family_table.py runs the check, and checks that every MTP model type and MTP draft
architecture of the pinned vLLM appears in the table.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
INDEX = ROOT / "fixtures" / "families" / "index.toml"
RECIPES = ROOT / "fixtures" / "recipes"
CASES = ROOT / "tests" / "cases"
RECORDED = ROOT / "tests" / "recorded"
BEGIN = "<!-- family-table:begin (scripts/gen_family_table.py writes this table; edit its sources) -->"
END = "<!-- family-table:end -->"
HEADER = [
    "| family | model types | vLLM MTP class | probed | fixtures: verdict | verdicts verified against |",
    "|---|---|---|---|---|---|",
]
PROBED = "yes: target + draft built on meta tensors, both `load_weights` run"


def index() -> dict[str, Any]:
    return tomllib.loads(INDEX.read_text())


def recipes_by_family() -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for path in sorted(RECIPES.glob("*.toml")):
        out[tomllib.loads(path.read_text())["family"]].append(path.stem)
    return out


def cases_by_recipe(key: str = "recipe") -> dict[str, list[dict[str, Any]]]:
    """Cases by the recipe they lint (KEY "recipe"), or by the separate draft they lint it
    with ("draft_recipe")."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(CASES.glob("*.toml")):
        for case in tomllib.loads(path.read_text()).get("case", []):
            if key in case:
                out[case[key]].append(case)
    return out


def recorded_report(case_id: str) -> dict[str, Any] | None:
    path = RECORDED / f"{case_id}.json.xz"
    if not path.is_file():
        return None
    return json.loads(lzma.decompress(path.read_bytes()))["report"]


def _built_both(report: dict[str, Any]) -> bool:
    models = report.get("models") or {}
    draft = models.get("draft") or {}
    return bool(draft.get("model_class")) and not report.get("construction_errors") and not report.get("config_error")


def _verdict(cases: list[dict[str, Any]], *, target: bool = False) -> str:
    """What the recipe's cases assert fires, each with the arguments and vLLM it needs."""
    if not cases:
        return "no case"
    out: list[str] = []
    for case in cases:
        what = ", ".join(sorted(case["fires"])) or "clean"
        args = [*case["args"], *(["--reference", case["reference_recipe"]] if case.get("reference_recipe") else [])]
        if args:
            what += f" with `{' '.join(args)}`"
        if target:  # a draft's case: which target it was linted against
            what += f" against `{case['recipe']}`"
        if case.get("vllm"):
            what += f" on {case['vllm']}"
        if what not in out:
            out.append(what)
    return "; ".join(out)


def row(family: dict[str, Any], recipes: dict[str, list[str]], cases: dict[str, list[dict[str, Any]]]) -> str:
    d = family.get("dir")
    name = f"[{family['name']}](fixtures/families/{d}/)" if d else family["name"]
    types = ", ".join(f"`{t}`" for t in family["model_types"])
    classes = ", ".join(f"`{c.strip()}`" for c in family["mtp_class"].split(","))
    mtp = f"{classes} (`{family['mtp_type']}`)"
    fixtures, versions, probed = [], set(), False
    if family.get("draft_checkpoint"):  # an assistant family: its recipes are the drafts
        cases = cases_by_recipe("draft_recipe")
    for recipe in recipes.get(d, []) if d else []:
        recipe_cases = cases.get(recipe, [])
        fixtures.append(f"`{recipe}`: {_verdict(recipe_cases, target=bool(family.get('draft_checkpoint')))}")
        for case in recipe_cases:
            report = recorded_report(case["id"])
            if report is None:
                continue
            vllm = report.get("vllm") or {}
            versions.add(f"{vllm.get('version')} ({str(vllm.get('commit') or '')[:10]})")
            probed = probed or _built_both(report)
    note = family.get("probe", "")
    probe = f"{PROBED}; {note}" if probed and note else PROBED if probed else note or "not tried"
    verified = ", ".join(f"vLLM {v}" for v in sorted(versions)) or "none"
    cells = [name, types, mtp, probe, "<br>".join(fixtures) or "none", verified]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render() -> str:
    """The table block, markers included."""
    idx = index()
    recipes, cases = recipes_by_family(), cases_by_recipe()
    lines = [BEGIN, *HEADER, *(row(f, recipes, cases) for f in idx["family"]), END]
    return "\n".join(lines)


def committed(text: str) -> str | None:
    """The table block as README.md has it, or None without markers."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[start : end + len(END)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check README.md (exit 1 when out of date)")
    args = ap.parse_args(argv)
    text = README.read_text()
    have, want = committed(text), render()
    if have is None:
        print(f"README.md has no family table markers ({BEGIN} ... {END})", file=sys.stderr)
        return 1
    if args.check:
        if have != want:
            print("README.md's family table is out of date: run python scripts/gen_family_table.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(text.replace(have, want))
    return 0


if __name__ == "__main__":
    sys.exit(main())
