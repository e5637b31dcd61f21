"""The acceptance construction: values that make a correctly wired MTP draft propose exactly
the target's token, and anything missing, partial or mis-loaded propose another.

Target: every embedding row is e0; attention and MLP output projections are zero, so the
residual stream stays e0 through every layer; lm_head row TOKEN is e0, so greedy decoding
emits TOKEN whatever the context. Row DECOY is e1.
Draft: eh_proj/input_proj maps e0 (from either half of [embedding | hidden]) to 0.5 * e1 each,
so the block's residual is 16 e1 (hidden 256: a normed unit vector is 16 long); the block's MLP
(or shared expert) turns e1 into 32 e0. The head sees 16 e1 + 32 e0: TOKEN wins 2 to 1.
A draft whose projection, MLP or head is missing reads zeros or garbage (token 0 or random);
a quantized projection loaded raw into a plain Linear (int8 127 or fp8 448 for 0.5) makes e1
win: DECOY. Magnitudes are exact in bf16.
"""

from __future__ import annotations

import re

import torch

TOKEN, DECOY = 7, 5
_MLP_IN = re.compile(r"(?:^|\.)(?:mlp|shared_experts?|shared_expert|shared_mlp)\.(?:gate_proj|up_proj|w1|w3)$")
_MLP_FUSED = re.compile(r"(?:^|\.)(?:mlp|shared_experts?|shared_expert|shared_mlp)\.gate_up_proj$")
_MLP_OUT = re.compile(r"(?:^|\.)(?:mlp|shared_experts?|shared_expert|shared_mlp)\.(?:down_proj|w2)$")
_PROJ = re.compile(r"(?:^|\.)(?:eh_proj|input_proj|fc|mtp_linear_proj\.\d+)$")  # ERNIE 4.5: model.mtp_linear_proj.0
_EMBED = re.compile(r"(?:^|\.)(?:embed_tokens|embed|wte|embeddings)$")  # Nemotron-H: backbone.embeddings
# Step-3.5 stores each MTP layer's own head as shared_head.output (vLLM loads it as shared_head.head)
_HEAD = re.compile(r"(?:^|\.)(?:lm_head|head|shared_head\.output)$")


def logical(module: str, leaf: str, shape: tuple[int, ...], in_mtp: bool) -> torch.Tensor:
    """The dequantized value of MODULE.LEAF (float32) in the construction."""
    w = torch.zeros(shape, dtype=torch.float32)
    if leaf == "weight" and len(shape) == 1 and _is_norm(module):
        w.fill_(1.0)  # RMSNorm / LayerNorm scales
    elif leaf == "weight" and len(shape) == 2:
        _matrix(module, w, in_mtp)
    return w  # biases, routers, fused 3-D experts: zero (they add nothing)


def _is_norm(module: str) -> bool:
    # the norm may be numbered (ERNIE 4.5: model.mtp_emb_norm.0) or wrap its scale (LongCat: enorm.m)
    names = [p for p in module.split(".") if not p.isdigit()]
    return any("norm" in p for p in names[-2:])


def _matrix(module: str, w: torch.Tensor, in_mtp: bool) -> None:
    out, inp = w.shape
    if _EMBED.search(module):
        w[:, 0] = 1.0
    elif _HEAD.search(module):
        if out > max(TOKEN, DECOY) and inp > 1:
            w[TOKEN, 0] = 1.0
            w[DECOY, 1] = 1.0
    elif not in_mtp:
        return
    elif _PROJ.search(module) and inp >= 2 and out > 1:
        w[1, 0] = 0.5
        w[1, inp // 2] = 0.5
    elif _MLP_FUSED.search(module):
        w[0, 1] = 1.0
        w[out // 2, 1] = 1.0
    elif _MLP_IN.search(module):
        w[0, 1] = 1.0
    elif _MLP_OUT.search(module):
        w[0, 0] = 0.125
