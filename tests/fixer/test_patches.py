"""The runtime patch set as a vLLM general plugin. What each patch fixes is proven by the
rule cases that re-probe with --with-patches (tests/cases/rule_cases.toml)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from mtplint.core.errors import BadInput
from mtplint.patches import catalog


def test_plugin_entry_point_is_registered():
    eps = {ep.name: ep.value for ep in entry_points(group="vllm.general_plugins")}
    assert eps.get("mtplint_patches") == "mtplint.patches.plugin:register"


def test_every_patch_names_rules_that_exist_and_rules_recommend_only_real_patches():
    from mtplint.engine.loader import load_rules

    rules = load_rules()
    for patch in catalog.PATCHES.values():
        assert set(patch.resolves) <= set(rules), patch.id
        assert patch.load() is not None
    for rule in rules.values():
        for pid in catalog.known(rule.fixes["patches"]):
            assert rule.code in catalog.PATCHES[pid].resolves, (rule.code, pid)


def test_unknown_patch_id_is_refused():
    with pytest.raises(BadInput, match="no-such-patch"):
        catalog.apply(["no-such-patch"])


PLUGIN_RUN = r"""
import os, sys
from mtplint.probe.child import runtime_shim
runtime_shim.install((9, 0), "NVIDIA H100 80GB HBM3", 80 * 2**30)
os.environ["MTPLINT_PATCHES"] = sys.argv[1]
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.models.deepseek_v4.nvidia.mtp import DeepSeekV4MTP
import vllm.model_executor.model_loader.utils as utils
print("routed", getattr(DeepSeekV4MTP.load_weights, "_mtplint_routed", False))
print("draft-hook", getattr(utils.initialize_model, "_mtplint_draft_unquantized", False))
"""


@pytest.mark.probe
def test_vllm_loads_the_plugin_and_applies_the_named_patches():
    proc = subprocess.run(
        [sys.executable, "-c", PLUGIN_RUN, "dsv4-mtp-route-top-level-head,draft-unquantized-mtp-block"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "routed True" in proc.stdout
    assert "draft-hook True" in proc.stdout


@pytest.mark.probe
def test_plugin_refuses_unknown_ids_loudly():
    proc = subprocess.run(
        [sys.executable, "-c", PLUGIN_RUN, "no-such-patch"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode != 0
    assert "no-such-patch" in proc.stderr


def test_versions_compare_as_pep440_with_local_tags_and_prereleases():
    assert catalog.in_range("0.29.0", ">=0.23,<0.30")
    assert not catalog.in_range("0.30.0", ">=0.23,<0.30")
    # PEP 440: `<0.30` excludes 0.30's own pre-releases and dev builds (they may carry the fix).
    assert not catalog.in_range("0.30.0rc1.dev12+g1234abcd", ">=0.23,<0.30")
    assert catalog.in_range("0.29.1.dev3+g1234abcd", ">=0.23,<0.30")
    assert catalog.in_range("0.23.0+cu130", ">=0.23,<0.30")


def test_findings_recommend_only_patches_covering_their_module_and_vllm():
    ids = ["mtp-quant-aware-eh-proj", "dsv4-o-proj-bf16-fallback", "dsv4-mtp-eproj-prefix"]
    rec = catalog.recommendable
    assert rec(ids, "0.33.0", "draft", "model.layers.61.eh_proj") == ["mtp-quant-aware-eh-proj"]
    assert rec(ids, "0.33.0", "target", "model.layers.3.ffn.experts") == []
    assert rec(ids, "0.29.0", "draft", "model.layers.43.mtp_block.attn.wo_a") == ["dsv4-o-proj-bf16-fallback"]
    assert rec(ids, "0.33.0", "draft", "model.layers.43.mtp_block.attn.wo_a") == []
    # The empty layer name compressed-tensors reports for a layer built without prefix=.
    assert rec(ids, "0.20.2", "draft", "") == ["dsv4-mtp-eproj-prefix"]
    assert rec(ids, "0.20.2", "draft", None) == []
    assert rec(["draft-unquantized-mtp-block"], "0.33.0", "target", "model.layers.0.attn.wq_a") == []


@pytest.mark.probe
def test_patch_outside_its_vllm_range_is_a_usage_error(tmp_path):
    """The pinned vLLM already has the O-projection fallback: asking for it exits 2 at once."""
    from fixtures.build import cached_build

    path = cached_build("dsv4-flash-official")
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", str(path), "-q", "--with-patches", "dsv4-o-proj-bf16-fallback"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "applies to vLLM >=0.23,<0.30; the probed vLLM is 0.33.0" in proc.stderr
