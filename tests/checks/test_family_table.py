"""The README's family table is generated (scripts/gen_family_table.py) and covers every MTP
draft the pinned vLLM ships: its `MTPModelTypes` and the `*MTP*` draft architectures of its
model registry, read from the installed release's source without importing it."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import gen_family_table as gen

from fixtures import layouts

# Registry entries that are MTP-named but are not MTP drafts of a family: an EAGLE head over
# DeepSeek, and the Transformers modeling backend (built from the target's own config).
NOT_FAMILY_DRAFTS = {"EagleDeepSeekMTPModel", "TransformersForMTP", "TransformersMoEForMTP"}


def _vllm_source(relative: str) -> str:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations, "the pinned vLLM is not installed (.venv)"
    return (Path(next(iter(spec.submodule_search_locations))) / relative).read_text()


def pinned_mtp_model_types() -> set[str]:
    """The string entries of `MTPModelTypes = Literal[...]` in vllm/config/speculative.py."""
    tree = ast.parse(_vllm_source("config/speculative.py"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MTPModelTypes" for t in node.targets):
            return {n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    raise AssertionError("MTPModelTypes not found in vllm/config/speculative.py")


def pinned_mtp_architectures() -> set[str]:
    """Registry keys naming an MTP draft (`"DeepSeekMTPModel": ("deepseek_mtp", ...)`)."""
    names = set(re.findall(r'^\s*"(\w*MTP\w*)":\s*\(', _vllm_source("model_executor/models/registry.py"), re.M))
    return names - NOT_FAMILY_DRAFTS


def table_rows() -> list[str]:
    block = gen.committed(gen.README.read_text())
    assert block is not None, "README.md has no family table"
    return [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| family")]


@pytest.mark.slow
def test_committed_table_is_generated():
    assert gen.committed(gen.README.read_text()) == gen.render(), "run: python scripts/gen_family_table.py"


def test_pinned_vllm_is_the_index_release():
    version = re.search(r"^__version__ = version = ['\"]([^'\"]+)['\"]", _vllm_source("_version.py"), re.M)
    assert version is not None and version.group(1) == gen.index()["vllm"]


@pytest.mark.parametrize("mtp_type", sorted(pinned_mtp_model_types()))
def test_every_mtp_model_type_has_a_row(mtp_type):
    rows = [r for r in table_rows() if f"(`{mtp_type}`)" in r]
    assert rows, f"{mtp_type} (MTPModelTypes of the pinned vLLM) has no row in the README family table"


@pytest.mark.parametrize("architecture", sorted(pinned_mtp_architectures()))
def test_every_mtp_draft_architecture_has_a_row(architecture):
    assert any(f"`{architecture}`" in r.split(" | ")[2] for r in table_rows()), architecture


def test_index_names_only_what_the_pinned_vllm_ships():
    types, archs = pinned_mtp_model_types(), pinned_mtp_architectures()
    for family in gen.index()["family"]:
        assert family["mtp_type"] in types, family["name"]
        for cls in family["mtp_class"].split(","):
            assert cls.strip() in archs, (family["name"], cls)


def test_every_family_fixture_is_indexed_and_generated():
    dirs = {f["dir"] for f in gen.index()["family"] if "dir" in f}
    dirs |= {s["dir"] for s in gen.index().get("separate", [])}  # separate targets and drafts: no row
    on_disk = {p.parent.name for p in layouts.FAMILIES_DIR.glob("*/config.json")}
    assert dirs == on_disk, (
        f"families without an index entry: {on_disk - dirs}; entries without a dir: {dirs - on_disk}"
    )
    assert dirs <= set(layouts.LAYOUTS), f"no layout generator: {dirs - set(layouts.LAYOUTS)}"


@pytest.mark.slow
def test_a_family_with_a_recorded_case_reads_as_probed(tmp_path, monkeypatch):
    """The probed column follows the recorded reports: without them a fixture family is not 'yes'."""
    glm5 = next(f for f in gen.index()["family"] if f.get("dir") == "glm5")
    with_records = gen.row(glm5, gen.recipes_by_family(), gen.cases_by_recipe())
    monkeypatch.setattr(gen, "RECORDED", tmp_path)
    without = gen.row(glm5, gen.recipes_by_family(), gen.cases_by_recipe())
    assert gen.PROBED in with_records and "vLLM 0.33.0" in with_records
    assert gen.PROBED not in without and without.endswith("| none |")
