"""`scripts/add_rule.py` scaffolds a rule that the engine loads, orders and runs with no other
change: one TOML, one check function, one case file."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

from add_rule import scaffold


def _copy_tree(tmp: Path) -> Path:
    root = tmp / "repo"
    for part in ("lint", "rules", "tests/cases", "tests/recorded"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests" / "support").mkdir()
    for helper in ("recorded_cases.py", "paths.py"):
        shutil.copy(ROOT / "tests" / "support" / helper, root / "tests" / "support" / helper)
    shutil.copy(ROOT / "README.md", root / "README.md")
    # The import package as installed: mtplint = lint/, mtplint.ruledata = rules/.
    (root / "pkg").mkdir()
    (root / "pkg" / "mtplint").symlink_to(root / "lint", target_is_directory=True)
    (root / "lint" / "ruledata").symlink_to(root / "rules", target_is_directory=True)
    return root


@pytest.mark.slow
def test_scaffolded_rule_loads_orders_and_runs(tmp_path):
    root = _copy_tree(tmp_path)
    written = scaffold("MTP099", "draft-reads-wrong-norm", None, root=root)
    assert [p.relative_to(root).as_posix() for p in written] == [
        "rules/MTP099.toml",
        "lint/checks/draft_reads_wrong_norm.py",
        "tests/cases/MTP099.toml",
        "README.md",
    ]
    assert "| MTP099 | draft-reads-wrong-norm |" in (root / "README.md").read_text()
    # The stub fills its message's field; make it hit once so the run shows the finding.
    check = root / "lint" / "checks" / "draft_reads_wrong_norm.py"
    check.write_text(
        check.read_text().replace(
            "    hits: list[Hit] = []\n",
            "    hits: list[Hit] = [Hit(key='x', fields={'module': 'm'}, location=ctx.config_location())]\n",
        )
    )
    code = (
        "import json, sys\n"
        f"sys.path[:0] = [{str(root / 'pkg')!r}, {str(root / 'tests' / 'support')!r}, {str(ROOT)!r}]\n"
        "import mtplint\n"
        f"assert mtplint.__file__.startswith({str(root)!r}), mtplint.__file__\n"
        "from mtplint.engine.loader import load_rules\n"
        "from mtplint.engine.order import rule_order\n"
        "from mtplint.engine.evaluate import evaluate\n"
        "from mtplint.inventory.checkpoint import load_inventory\n"
        "from recorded_cases import read_recorded\n"
        "from fixtures.build import cached_build\n"
        "rec = read_recorded('dsv4-official-h100-n1')\n"
        "inv = load_inventory(cached_build('dsv4-flash-official'))\n"
        "from mtplint.core.run_inputs import RunInputs\n"
        "inputs = RunInputs.from_json({**rec['inputs'], 'path': 'ckpt'})\n"
        "findings, evaluated = evaluate(inv, rec['report'], inputs)\n"
        "print(json.dumps({'order': rule_order(load_rules()), 'codes': sorted({f.code for f in findings}),\n"
        "                  'messages': [f.message for f in findings if f.code == 'MTP099']}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "MTP099" in seen["order"]
    assert seen["codes"] == ["MTP099"]
    assert seen["messages"] == ["m: TODO, with the fields the check fills"]


def test_the_walkthrough_in_contributing_scaffolds_a_free_code():
    # The add-a-rule walkthrough must work as written: its code must not be taken.
    text = (ROOT / "CONTRIBUTING.md").read_text()
    (code,) = set(re.findall(r"scripts/add_rule\.py (MTP\d{3}) ", text))
    assert not (ROOT / "rules" / f"{code}.toml").exists()
    assert f"rules/{code}.toml" in text and f"tests/cases/{code}.toml" in text
