"""The bundled runtime patch set: id -> patch. Applied in vLLM processes by the plugin
(MTPLINT_PATCHES=ids) and inside the probe (--with-patches ids)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import BadInput


@dataclass(frozen=True)
class Patch:
    id: str
    resolves: tuple[str, ...]  # rule codes
    vllm: str  # PEP 440 specifier of the vLLM versions it applies to
    upstream: str  # the upstream PR or issue it mirrors
    summary: str
    module: str  # mtplint.patches.<module>, exposing apply() -> dict

    def load(self) -> Callable[[], dict[str, Any]]:
        import importlib

        return importlib.import_module(f"mtplint.patches.{self.module}").apply


PATCHES: dict[str, Patch] = {p.id: p for p in (
    Patch("draft-unquantized-mtp-block", ("MTP002",), ">=0.20",
          "https://github.com/vllm-project/vllm/issues/43893",
          "build the MTP draft unquantized when every MTP tensor on disk is unquantized",
          "draft_unquantized"),
    Patch("dsv4-mtp-route-top-level-head", ("MTP004",), ">=0.20",
          "https://github.com/vllm-project/vllm/pull/43459",
          "route top-level head.weight/embed.weight into each DeepSeek-V4 MTP layer",
          "dsv4_top_level_head"),
    Patch("mtp-quant-aware-eh-proj", ("MTP003",), ">=0.20",
          "https://github.com/vllm-project/vllm/pull/48506",
          "build a quantized eh_proj of DeepSeek/GLM MTP drafts with its quant method",
          "eh_proj"),
)}


def known(ids: list[str]) -> list[str]:
    return [i for i in ids if i in PATCHES]


def check_version(patch: Patch) -> None:
    """Refuse loudly where the running vLLM is outside the patch's range."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    import vllm

    version = Version(str(vllm.__version__).split("+")[0])
    if version not in SpecifierSet(patch.vllm):
        raise RuntimeError(f"mtplint patch {patch.id} applies to vLLM {patch.vllm}, not {version}")


def apply(ids: list[str]) -> list[dict[str, Any]]:
    unknown = [i for i in ids if i not in PATCHES]
    if unknown:
        raise BadInput(f"unknown runtime patch id(s): {', '.join(unknown)}; "
                       f"bundled: {', '.join(PATCHES)}")
    out = []
    for i in ids:
        patch = PATCHES[i]
        check_version(patch)
        out.append({"id": i, **patch.load()()})
    return out
