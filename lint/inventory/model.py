"""What a checkpoint holds, read from headers only: the inventory every rule and the probe start from."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str  # safetensors dtype string: "BF16", "F8_E4M3", "I32", ...
    shape: tuple[int, ...]
    file: str  # shard file name, relative to the checkpoint root
    begin: int  # absolute byte offset of the data in the file
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


_UNQUANTIZED_KINDS = frozenset(("bf16", "fp16", "fp32", "unknown"))


@dataclass
class ModuleFormat:
    """The on-disk format of one module (tensors sharing a module path), as fingerprinted from its tensors."""

    module: str
    # "bf16", "fp16", "fp32", "fp8", "fp8-block", "fp8-dsv4", "ct-pack-quantized", "ct-nvfp4",
    # "modelopt-nvfp4", "gptq", "awq", "mxfp4", "fp4-packed", ...
    kind: str
    weight_dtype: str | None
    suffixes: tuple[str, ...]  # the tensor leaf names under the module: ("weight", "weight_scale_inv")

    @property  # asked per fed tensor by several checks: a set lookup, cheaper than cached_property's lock
    def quantized(self) -> bool:
        return self.kind not in _UNQUANTIZED_KINDS


@dataclass
class DeclaredQuant:
    """The quantization the artifact declares (config.json quantization_config / hf_quant_config.json)."""

    method: (
        str | None
    )  # vLLM's quant_method name: "compressed-tensors", "modelopt", "modelopt_fp4", "fp8", "gptq", "awq", ...
    source: str | None  # file that declared it
    exclusions: list[str] = field(default_factory=list)  # entries as written (ignore / exclude_modules / ...)
    exclusion_key: str | None = None  # the config key holding them, e.g. "quantization_config.ignore"
    details: dict[str, Any] = field(default_factory=dict)  # format-specific parsed facts (schemes, block size, ...)
    raw: dict[str, Any] | None = None


@dataclass
class Inventory:
    root: Path
    config: dict[str, Any]
    config_path: Path
    tensors: dict[str, TensorInfo]
    shards: list[str]
    index_path: Path | None
    hf_quant_config: dict[str, Any] | None
    declared: DeclaredQuant
    digest: str  # stable digest of (names, dtypes, shapes): the probe cache key part for the layout
    modules: dict[str, ModuleFormat] = field(default_factory=dict)
    # Shards next to an index that its weight_map never names (a sidecar mtp.safetensors): vLLM's
    # index-based loading skips them. Shard -> the tensors its header holds (None: unreadable).
    unindexed: dict[str, list[TensorInfo] | None] = field(default_factory=dict)
    # *.safetensors.index.json files besides model.safetensors.index.json: vLLM reads none of them.
    other_indexes: list[str] = field(default_factory=list)
    # Files an interrupted `mtplint fix` left at the top level (inventory.fix_files): never
    # memoized, they come and go without changing anything the memo is keyed on.
    fix_leftovers: list[str] = field(default_factory=list)
    # "hf://ORG/NAME@COMMIT" for a hub repository (root is then the local snapshot of its small
    # files); None for a local directory.
    origin: str | None = None

    def tensors_under(self, prefix: str) -> list[TensorInfo]:
        return [t for n, t in self.tensors.items() if n.startswith(prefix)]

    @cached_property
    def name_heads(self) -> frozenset[str]:
        """mtp_layout.name_heads of every tensor name in the shards, those the index leaves out
        included: the MTP questions about the checkpoint's names, asked once per lint."""
        from ..core.mtp_layout import name_heads

        outside = (t.name for ts in self.unindexed.values() for t in ts or ())
        return frozenset(name_heads(self.tensors)) | frozenset(name_heads(outside))
