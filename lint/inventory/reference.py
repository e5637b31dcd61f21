"""How a checkpoint's MTP block compares with the same block in its source checkpoint
(`mtplint PATH --reference SOURCE`): on-disk format, bits per weight, and a few sampled bytes.

Converters that dequantize or requantize the MTP block (NVFP4 requant of MTP experts, BF16
dequant of `e_proj`/`h_proj`, 4-bit MTP heads) leave a checkpoint that loads and drafts
badly (catalog MTPL-027). Only headers say the formats; the sampled windows say whether a
block kept its format but not its bytes. Modules are paired by their on-disk module path:
a module the artifact lacks is another rule's subject (MTP006 and the loading rules).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..core.mtp_layout import is_mtp_name, layer_role, mtp_layer_index, num_hidden_layers
from ..core.regular_files import open_regular
from .fingerprint import canonical_leaf, is_fused_expert_module
from .lfs import is_pointer
from .model import Inventory, ModuleFormat, TensorInfo

# Leaves that carry the weight's values (canonical names, see fingerprint.canonical_leaf);
# scales, zero points and index tensors are not counted in bits per weight.
WEIGHT_LEAVES = ("weight", "weight_packed", "qweight", "blocks")
_FLOAT_BITS = {"bf16": 16.0, "fp16": 16.0, "fp32": 32.0}
# Bits per weight of a kind whose logical element count its own shapes do not give (a packed
# weight): used when the reference module is not a plain float either. The int-packed kinds
# (GPTQ, AWQ, compressed-tensors pack-quantized) are counted as 4-bit, as every MTP-bearing
# export mtplint knows writes them; against a float reference their bits are measured.
KIND_BITS = {
    **_FLOAT_BITS,
    "fp8": 8.0,
    "fp8-block": 8.0,
    "fp8-dsv4": 8.0,
    "ct-fp8": 8.0,
    "mxfp8": 8.0,
    "int8": 8.0,
    "fp4-dsv4": 4.0,
    "ct-nvfp4": 4.0,
    "modelopt-nvfp4": 4.0,
    "mxfp4": 4.0,
    "fp4-packed": 4.0,
    "gptq": 4.0,
    "awq": 4.0,
    "ct-pack-quantized": 4.0,
}
# Sampled windows of a module's main weight tensor: start, middle, end.
WINDOWS = 3
WINDOW_BYTES = 4096
# Paired modules sampled per comparison, spread over the block (a DeepSeek MTP layer holds
# hundreds of experts: a few dozen reads say whether a converter rewrote it).
SAMPLED_MODULES = 48


@dataclass(frozen=True)
class Sample:
    """What the sampled windows of one module said: "same", "differs" or "no data" (why)."""

    status: str
    reason: str = ""
    windows: int = 0  # windows compared (both sides non-zero)


@dataclass(frozen=True)
class PairedModule:
    module: str
    layer: int | None  # MTP layer index (None: a shared part such as Qwen3-Next's `mtp.fc`)
    artifact: ModuleFormat
    reference: ModuleFormat
    tensor: str  # the artifact's main weight tensor
    file: str  # the artifact shard holding it
    bits: float | None  # bits per weight in the artifact
    reference_bits: float | None
    # The artifact trunk's bits for the same role; for a module of the MTP block only (`e_proj`,
    # `eh_proj`, `mtp.fc`), those most trunk matrices compared here keep (trunk_same_module False).
    trunk_bits: float | None
    trunk_same_module: bool = True
    sample: Sample | None = None  # None: not sampled (different format or shapes, or over the budget)

    @property
    def lost_bits(self) -> bool:
        return self.bits is not None and self.reference_bits is not None and self.bits < self.reference_bits

    @property
    def format_changed(self) -> bool:
        return self.artifact.kind != self.reference.kind


@dataclass
class Comparison:
    pairs: list[PairedModule]
    # Why data was not sampled at all (a hub repository's shards are never downloaded).
    unsampled: str | None = None
    sampled_modules: int = 0
    reference_modules: int = 0


def mtp_modules(inventory: Inventory) -> dict[str, ModuleFormat]:
    n = num_hidden_layers(inventory.config)
    return {m: f for m, f in inventory.modules.items() if is_mtp_name(m, n)}


def compare(artifact: Inventory, reference: Inventory, *, sample: bool = True) -> Comparison:
    ref_mtp = mtp_modules(reference)
    n_artifact = num_hidden_layers(artifact.config)
    mtp = mtp_modules(artifact)
    roles = {r for m in mtp if m in ref_mtp and (r := layer_role(m)) is not None}
    trunk, trunk_matrices = _trunk_bits_by_role(artifact, reference, roles)
    pairs: list[PairedModule] = []
    for module, fmt in sorted(mtp.items()):
        ref = ref_mtp.get(module)
        if ref is None:
            continue
        leaves = weight_tensors(artifact, fmt)
        if not leaves:
            continue
        main = max(leaves, key=lambda t: t.nbytes)
        role = layer_role(module)
        same_module = role is not None and role in trunk
        trunk_bits = trunk[role] if role is not None and same_module else None
        if not same_module and len(main.shape) >= 2:
            trunk_bits = trunk_matrices
        pairs.append(
            PairedModule(
                module=module,
                layer=mtp_layer_index(module, n_artifact),
                artifact=fmt,
                reference=ref,
                tensor=main.name,
                file=main.file,
                bits=bits_per_weight(artifact, fmt, reference),
                reference_bits=bits_per_weight(reference, ref, reference),
                trunk_bits=trunk_bits,
                trunk_same_module=same_module,
            )
        )
    out = Comparison(pairs, reference_modules=len(ref_mtp))
    if sample:
        _sample(out, artifact, reference)
    return out


def weight_tensors(inventory: Inventory, fmt: ModuleFormat) -> list[TensorInfo]:
    """The module's weight-carrying tensors (not its scales)."""
    fused = is_fused_expert_module(fmt.module)
    parent = fmt.module.rpartition(".")[0] if fused else fmt.module
    out = []
    for leaf in fmt.suffixes:
        canon = canonical_leaf(fmt.module, leaf) if fused else leaf
        t = inventory.tensors.get(f"{parent}.{leaf}")
        if canon in WEIGHT_LEAVES and t is not None:
            out.append(t)
    return out


def bits_per_weight(inventory: Inventory, fmt: ModuleFormat, reference: Inventory) -> float | None:
    """Stored bits per logical weight: the weight tensors' bytes * 8 over the logical element
    count of the same module in the reference (its own count where it is a plain float, its
    bytes over its kind's width where it is packed), else the kind's own width. Counting from
    the reference keeps bytes that a converter only renamed or re-labelled at their width."""
    tensors = weight_tensors(inventory, fmt)
    if not tensors:
        return None
    elements = _logical_elements(reference, reference.modules.get(fmt.module))
    if elements:
        return round(sum(t.nbytes for t in tensors) * 8 / elements, 3)
    return KIND_BITS.get(fmt.kind)


def _logical_elements(inventory: Inventory, fmt: ModuleFormat | None) -> float | None:
    if fmt is None:
        return None
    tensors = weight_tensors(inventory, fmt)
    if fmt.kind in _FLOAT_BITS:
        return sum(math.prod(t.shape) for t in tensors) or None
    width = KIND_BITS.get(fmt.kind)
    return sum(t.nbytes for t in tensors) * 8 / width if width and tensors else None


def _trunk_bits_by_role(
    artifact: Inventory, reference: Inventory, roles: set[str]
) -> tuple[dict[str, float], float | None]:
    """role -> the bits most trunk layers store that module with (a kept-BF16 first or last
    layer does not decide what the trunk's precision is), for the roles asked about; and the
    bits most of those trunk modules that are matrices keep (norms are never quantized)."""
    n = num_hidden_layers(artifact.config)
    seen: dict[str, Counter[float]] = {}
    matrices: Counter[float] = Counter()
    for module, fmt in artifact.modules.items():
        role = layer_role(module)
        if role not in roles or is_mtp_name(module, n):
            continue
        bits = bits_per_weight(artifact, fmt, reference)
        if bits is not None:
            seen.setdefault(role, Counter())[bits] += 1
            if any(len(t.shape) >= 2 for t in weight_tensors(artifact, fmt)):
                matrices[bits] += 1
    return {role: _most_common(c) for role, c in seen.items()}, (_most_common(matrices) if matrices else None)


def _most_common(counts: Counter[float]) -> float:
    # A tie goes to the wider precision: the trunk is never made to look narrower than it is.
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]


def _sample(out: Comparison, artifact: Inventory, reference: Inventory) -> None:
    hub = [i.origin for i in (artifact, reference) if i.origin]
    if hub:
        out.unsampled = f"{hub[0]} is a hub repository: its shards are not downloaded, so no bytes were compared"
        return
    same_layout = [
        i
        for i, p in enumerate(out.pairs)
        if not p.format_changed and _shapes(artifact, p.artifact) == _shapes(reference, p.reference)
    ]
    chosen = _spread(same_layout, SAMPLED_MODULES)
    for i in chosen:
        p = out.pairs[i]
        ref_main = reference.tensors.get(p.tensor)
        art_main = artifact.tensors[p.tensor]
        result = (
            compare_windows(artifact.root, art_main, reference.root, ref_main)
            if ref_main is not None
            else Sample("no data", "the reference has no tensor of that name")
        )
        out.pairs[i] = PairedModule(**{**p.__dict__, "sample": result})
    out.sampled_modules = len(chosen)


def _shapes(inventory: Inventory, fmt: ModuleFormat) -> list[tuple[str, str, tuple[int, ...]]]:
    return sorted((t.name, t.dtype, t.shape) for t in weight_tensors(inventory, fmt))


def _spread(items: list[int], limit: int) -> list[int]:
    if len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(k * step)] for k in range(limit)]


def compare_windows(root_a: Path, a: TensorInfo, root_b: Path, b: TensorInfo) -> Sample:
    """Compare the start, middle and end windows of two same-shaped tensors. A window that is
    all zeros on either side is no data (a sparse or placeholder export), never a difference."""
    wa, why_a = read_windows(root_a, a)
    wb, why_b = read_windows(root_b, b)
    if wa is None or wb is None:
        return Sample("no data", why_a or why_b)
    compared = 0
    for x, y in zip(wa, wb, strict=True):
        if not x.strip(b"\0") or not y.strip(b"\0"):
            continue
        compared += 1
        if hashlib.blake2b(x, digest_size=16).digest() != hashlib.blake2b(y, digest_size=16).digest():
            return Sample("differs", windows=compared)
    if not compared:
        return Sample("no data", "every sampled window is all zeros")
    return Sample("same", windows=compared)


def read_windows(root: Path, t: TensorInfo) -> tuple[list[bytes] | None, str]:
    """The tensor's sampled windows, or None and why there is no data (missing or short
    shard, Git LFS pointer)."""
    if "/" in t.file or "\\" in t.file or t.file in (".", ".."):
        return None, f"{t.file}: not a shard name"
    path = root / t.file
    if is_pointer(path):
        return None, f"{t.file} is a Git LFS pointer"
    try:
        f, st = open_regular(path)
        with f:
            if st.st_size < t.end:
                return None, f"{t.file} is shorter than its header says"
            return [_read(f, t.begin + off, size) for off, size in window_offsets(t.nbytes)], ""
    except OSError as e:
        return None, f"{t.file}: {e.strerror or e}"


def window_offsets(nbytes: int) -> Iterator[tuple[int, int]]:
    """(offset in the tensor, size) of each window; fewer for a tensor smaller than them all."""
    size = min(WINDOW_BYTES, nbytes)
    if size <= 0:
        return
    starts = sorted({0, max(0, (nbytes - size) // 2), nbytes - size})[:WINDOWS]
    for s in starts:
        yield s, size


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(size)
