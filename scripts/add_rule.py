"""Scaffold a new rule: its declarative file, its check function and its case file.

    python scripts/add_rule.py MTP015 draft-reads-wrong-norm --check-module loading
    python scripts/add_rule.py MTP015 draft-reads-wrong-norm            # a new check module

Writes rules/MTP015.toml (code, name, severity, message, [relations], explanation to fill),
a `@check` stub (in lint/checks/<module>.py), tests/cases/MTP015.toml (a firing and a silent
case to point at fixture recipes) and the README's rule-table row. The engine finds the
check by name and orders the rule from its [relations]: nothing else is registered by hand.
Then: fill the TODOs, record the new cases' probe reports
(`python scripts/record_reports.py --only ID ...`: a full `make record` re-probes every case), `make test-fast`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RULE = '''code = "{code}"
name = "{name}"
severity = "error"
summary = "TODO: one line, what is wrong"
check = "{func}"
message = "{{module}}: TODO, with the fields the check fills"
references = []

[fixes]
patches = []
artifact = []

[relations]
# provides = ["label"]        causes its findings stand for (later rules link to them)
# caused_by = ["label"]       causes its findings link to as consequences
# claims = ["load-error"]     evidence it accounts for (MTP008/MTP009 report the rest)

[explanation]
what = """
TODO: what the rule compares, and where the evidence comes from (the probe, or a knowledge
table marked basis: knowledge).
"""
why = """
TODO: what breaks at serve time, quoting vLLM's error or naming the silent failure.
"""
example = """
TODO: a concrete failing checkpoint and the vLLM output.
"""
fix = """
TODO: the artifact fix and the runtime fix.
"""
'''

CHECK = '''

@check(fields=("module",))
def {func}(ctx: Context, options: None) -> list[Hit]:
    """TODO: what this check reads from ctx (inventory, probe report) and when it hits."""
    hits: list[Hit] = []
    return hits
'''

MODULE_HEAD = '''"""TODO: what the checks in this module look at."""

from __future__ import annotations

from . import check
from .context import Context, Hit
'''

CASES = """# {code}'s cases: where it fires (first in `fires`) and where it must stay silent.
# Each case lints one fixture recipe (`python -m fixtures list`) with `args`, through
# tests/checks/test_rule_cases_fast.py (recorded probe report) and tests/checks/test_rule_cases.py (the
# real probe); `vllm` names another release than the pin, installed beside it.

[[case]]
id = "{name}-fires"
recipe = "TODO-a-recipe-that-breaks"
args = []
fires = ["{code}"]
silent = []

[[case]]
id = "{name}-silent"
recipe = "TODO-its-official-counterpart"
args = []
fires = []
silent = ["{code}"]
"""


def scaffold(code: str, name: str, module: str | None, root: Path = ROOT) -> list[Path]:
    if not re.fullmatch(r"MTP\d{3}", code):
        raise SystemExit(f"rule code must look like MTP015, not {code!r}")
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)+", name):
        raise SystemExit(f"rule name must be kebab-case words, not {name!r}")
    func = name.replace("-", "_")
    rule_file = root / "rules" / f"{code}.toml"
    case_file = root / "tests" / "cases" / f"{code}.toml"
    check_file = root / "lint" / "checks" / f"{module or func}.py"
    for path in (rule_file, case_file):
        if path.exists():
            raise SystemExit(f"{path.relative_to(root)} exists already")
    if any(f"def {func}(" in p.read_text() for p in (root / "lint" / "checks").glob("*.py")):
        raise SystemExit(f"a check named {func} exists already")
    rule_file.write_text(RULE.format(code=code, name=name, func=func))
    case_file.write_text(CASES.format(code=code, name=name))
    text = check_file.read_text() if check_file.exists() else MODULE_HEAD
    check_file.write_text(text.rstrip("\n") + "\n" + CHECK.format(func=func))
    readme = root / "README.md"
    lines = readme.read_text().splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if re.match(r"\| MTP\d{3} \|", line)]
    if rows:
        lines.insert(rows[-1] + 1, f"| {code} | {name} | TODO: one line |\n")
        readme.write_text("".join(lines))
    return [rule_file, check_file, case_file, readme]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("code", help="MTPnnn")
    parser.add_argument("name", help="kebab-case-name")
    parser.add_argument("--check-module", help="existing lint/checks module to add the check to")
    opts = parser.parse_args(argv)
    for path in scaffold(opts.code, opts.name, opts.check_module):
        print(f"wrote {path.relative_to(ROOT)}")
    print(
        f"next: fill the TODOs, point tests/cases/{opts.code}.toml at fixture recipes, record only its cases "
        f"(`python scripts/record_reports.py --only {opts.name}-fires {opts.name}-silent`), `make test-fast`"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
