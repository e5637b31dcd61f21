"""The bundled runtime patch set: id -> patch. Applied in vLLM processes by the plugin
(MTPLINT_PATCHES=ids) and inside the probe (--with-patches ids)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import BadInput
from ..core.versions import in_range


@dataclass(frozen=True)
class Patch:
    id: str
    resolves: tuple[str, ...]  # rule codes
    vllm: str  # PEP 440 specifier of the vLLM versions it applies to
    upstream: str  # the upstream PR or issue it mirrors
    summary: str
    module: str  # mtplint.patches.<module>, exposing apply() -> dict
    # What it can resolve: findings about these models, at runtime module paths matching
    # one of these regexes (none: any path). A rule names its patches; a finding of that
    # rule only recommends the ones whose scope and vLLM range cover it.
    models: tuple[str, ...] = ("target", "draft")
    paths: tuple[str, ...] = ()

    def load(self) -> Callable[[], dict[str, Any]]:
        import importlib

        return importlib.import_module(f"mtplint.patches.{self.module}").apply

    def covers(self, vllm_version: str | None, model: str | None, path: str | None) -> bool:
        if vllm_version and not in_range(vllm_version, self.vllm):
            return False
        if model and model not in self.models:
            return False
        return not self.paths or (path is not None and any(re.search(p, path) for p in self.paths))


PATCHES: dict[str, Patch] = {
    p.id: p
    for p in (
        Patch(
            "draft-unquantized-mtp-block",
            ("MTP002",),
            ">=0.20",
            "https://github.com/vllm-project/vllm/issues/43893",
            "build the MTP draft unquantized when every MTP tensor on disk is unquantized",
            "draft_unquantized",
            models=("draft",),
        ),
        Patch(
            "dsv4-mtp-route-top-level-head",
            ("MTP004",),
            ">=0.20",
            "https://github.com/vllm-project/vllm/pull/43459",
            "route top-level head.weight/embed.weight into each DeepSeek-V4 MTP layer",
            "dsv4_top_level_head",
            models=("draft",),
        ),
        Patch(
            "mtp-quant-aware-eh-proj",
            ("MTP003",),
            ">=0.20",
            "https://github.com/vllm-project/vllm/pull/48506",
            "build a quantized eh_proj of DeepSeek/GLM MTP drafts with its quant method",
            "eh_proj",
            models=("draft",),
            paths=(r"\.eh_proj$",),
        ),
        Patch(
            "dsv4-o-proj-bf16-fallback",
            ("MTP010",),
            ">=0.23,<0.30",
            "https://github.com/vllm-project/vllm/pull/44847",
            "run DeepSeek-V4's O projection in BF16 when wo_a has no FP8 scale (fixed in vLLM 0.30.0)",
            "dsv4_o_proj_bf16",
            paths=(r"\.attn\.wo_a$",),
        ),
        Patch(
            "dsv4-mtp-eproj-prefix",
            ("MTP009",),
            ">=0.20,<0.24",
            "https://github.com/vllm-project/vllm/pull/44837",
            "pass prefix= to DeepSeek-V4 MTP e_proj/h_proj so quant configs match them (fixed in vLLM 0.24.0)",
            "dsv4_eproj_prefix",
            models=("draft",),
            paths=(r"^$", r"\.[eh]_proj$"),
        ),
    )
}


def recommendable(ids: list[str], vllm_version: str | None, model: str | None, path: str | None) -> list[str]:
    return [i for i in ids if i in PATCHES and PATCHES[i].covers(vllm_version, model, path)]


def known(ids: list[str]) -> list[str]:
    return [i for i in ids if i in PATCHES]


def check_version(patch: Patch) -> None:
    """Refuse loudly where the running vLLM is outside the patch's range."""
    import vllm

    if not in_range(vllm.__version__, patch.vllm):
        raise RuntimeError(f"mtplint patch {patch.id} applies to vLLM {patch.vllm}, not {vllm.__version__}")


def apply(ids: list[str]) -> list[dict[str, Any]]:
    unknown = [i for i in ids if i not in PATCHES]
    if unknown:
        raise BadInput(f"unknown runtime patch id(s): {', '.join(unknown)}; bundled: {', '.join(PATCHES)}")
    out = []
    for i in ids:
        patch = PATCHES[i]
        check_version(patch)
        out.append({"id": i, **patch.load()()})
    return out
