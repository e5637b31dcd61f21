"""The package's layers, read from its imports (tests/support/import_graph.py): the data flows one way,
nothing imports the command line but the command line, and the probe child runs in vLLM's
interpreter with nothing of mtplint but what it needs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest
from import_graph import PACKAGE, cycles, folder_cycles, folder_imports, imports, modules

# What each layer may import besides itself and mtplint.core. A layer not named may import
# any layer but the ones some rule below keeps from it.
ALLOWED = {
    "mtplint.core": set(),
    "mtplint.probe.child": {
        "mtplint.patches",
        "mtplint.probe.report",
        "mtplint.probe.lifecycle",
        "mtplint.probe.phases",
    },
    "mtplint.view": {"mtplint.inventory", "mtplint.probe.report"},
    "mtplint.checks": {"mtplint.view", "mtplint.inventory", "mtplint.probe.report", "mtplint.engine"},
}
# Layers below the pipeline: none of them imports the settings, the pipeline or an output stage.
LOWER = ("mtplint.core", "mtplint.inventory", "mtplint.probe", "mtplint.view", "mtplint.checks", "mtplint.engine")
UPPER = ("mtplint.config", "mtplint.pipeline", "mtplint.cli", "mtplint.fixer", "mtplint.reporters")


def _in(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def _violations(rule: str, importer_layer: str, may_import: set[str]) -> list[str]:
    out = []
    for module, imported in imports().items():
        if not _in(module, importer_layer):
            continue
        for target in imported:
            if target in ("mtplint", "mtplint.probe") or _in(target, importer_layer) or _in(target, "mtplint.core"):
                continue
            if not any(_in(target, ok) for ok in may_import):
                out.append(f"{rule}: {module} imports {target}")
    return out


def test_no_import_cycles():
    assert cycles() == []


def test_no_folder_imports_another_that_imports_it_back():
    # Every folder, mtplint.probe.child included: two folders that need each other are one
    # layer drawn as two. (The parent reaches the child through `python -m`, and both through
    # the report contract in mtplint.probe.)
    assert {"mtplint.api", "mtplint.probe", "mtplint.probe.child", "mtplint.twin", "mtplint.envs"} <= set(
        folder_imports()
    )
    assert folder_cycles() == []


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_what_it_may(layer):
    assert _violations(layer, layer, ALLOWED[layer]) == []


def test_nothing_below_the_pipeline_imports_above_it():
    found = [
        f"{m} imports {t}"
        for m, targets in imports().items()
        if any(_in(m, low) for low in LOWER)
        for t in targets
        if any(_in(t, up) for up in UPPER)
    ]
    assert found == []


def test_only_the_command_line_imports_the_command_line():
    found = [
        f"{m} imports {t}"
        for m, targets in imports().items()
        if not _in(m, "mtplint.cli") and m != "mtplint.__main__"
        for t in targets
        if _in(t, "mtplint.cli")
    ]
    assert found == []


def test_the_fixer_and_the_reporters_read_the_report_view_not_the_checks():
    found = [
        f"{m} imports {t}"
        for m, targets in imports().items()
        if _in(m, "mtplint.fixer") or _in(m, "mtplint.reporters")
        for t in targets
        if _in(t, "mtplint.checks")
    ]
    assert found == []


def test_the_top_of_the_package_holds_at_most_five_modules():
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= 5, top


def test_the_import_graph_sees_every_module():
    # A layering test that parsed nothing would pass: it must know the modules it judges.
    assert {"mtplint.cli.app", "mtplint.probe.child.entry", "mtplint.view.report_view"} <= set(modules())
    assert "mtplint.core.errors" in imports()["mtplint.cli.app"]


_BLOCKER = """
import importlib.abc, sys
ALLOWED = ("mtplint.core", "mtplint.patches", "mtplint.probe.child", "mtplint.probe.report",
           "mtplint.probe.lifecycle", "mtplint.probe.phases")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.startswith("mtplint.") and not any(name == a or name.startswith(a + ".") for a in ALLOWED):
            if name not in ("mtplint.probe",):
                raise ImportError("the probe child imported " + name)
        return None
sys.meta_path.insert(0, Block())
import mtplint.probe.child.entry, mtplint.probe.child.worker, mtplint.probe.child.construct
import mtplint.probe.child.dryrun, mtplint.probe.child.matchers, mtplint.probe.child.engine_config
print("ok")
"""


def test_the_probe_child_imports_nothing_outside_its_own_modules():
    run = subprocess.run([sys.executable, "-c", _BLOCKER], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


_IMPORT_IN_TEXT = re.compile(
    r"\bfrom (mtplint(?:\.\w+)*) import ([\w, ]+)|\bimport (mtplint(?:\.\w+)+)|\"-m\", \"(mtplint[\w.]*)\""
)


def _top_level_names(module: str) -> set[str]:
    tree = ast.parse(modules()[module].read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def test_module_paths_written_in_strings_still_exist():
    # Code that runs in another interpreter (a provisioning check, `python -m ...`) names
    # mtplint's modules in strings, where no import checker sees them move.
    known = modules()
    missing = []
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            for m in _IMPORT_IN_TEXT.finditer(node.value):
                source, names, imported, run = m.groups()
                target = source or imported or run
                if target not in known:
                    missing.append(f"{module}: {target}")
                    continue
                for name in (names or "").replace(" ", "").split(","):
                    if name and f"{target}.{name}" not in known and name not in _top_level_names(target):
                        missing.append(f"{module}: {target}.{name}")
    assert missing == []


def test_no_function_is_longer_than_80_lines():
    """Orchestration splits into named stages instead of growing (issue #34): every function in the
    package reads in one screen."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > 80:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def test_tests_are_grouped_by_stage():
    """Test modules live in a folder named for the stage they test (tests/inventory, tests/probe,
    ...); shared helpers in tests/support. A module in tests/ itself has no stage."""
    from paths import TESTS

    assert sorted(p.name for p in TESTS.glob("*.py")) == ["conftest.py"]
    assert not list((TESTS / "support").glob("test_*.py"))
