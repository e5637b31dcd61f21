"""`mtplint twin PATH OUT`: write the twin of the checkpoint at PATH into OUT."""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..core.errors import BadInput
from ..core.mtp_layout import is_mtp_name, num_hidden_layers
from ..inventory.checkpoint import load_inventory
from ..inventory.fingerprint import group_modules
from ..inventory.model import Inventory, TensorInfo
from . import encode, shrink, values

MANIFEST = ".mtplint-twin.json"
_SMALL_FILE = 16 * 2**20  # sidecar files (tokenizer, remote code) copied as they are


@dataclass
class Twin:
    path: Path
    source: Path
    tensors: int
    seconds: float
    token: int
    plan: shrink.Plan


def _num_bits(config: dict[str, Any]) -> int:
    qc = config.get("quantization_config") or {}
    for group in (qc.get("config_groups") or {}).values():
        bits = ((group or {}).get("weights") or {}).get("num_bits")
        if isinstance(bits, int):
            return bits
    return 4


def _logical_source_shape(leaves: dict[str, TensorInfo], bits: int) -> tuple[int, ...] | None:
    if "weight_packed" in leaves:
        o, i = leaves["weight_packed"].shape[:2]
        return (o, i * (32 // bits))
    w = leaves.get("weight")
    return tuple(w.shape) if w is not None else None


def _leaf_shape(name: str, leaf: str, t: TensorInfo, src: tuple[int, ...], new: tuple[int, ...], p: shrink.Plan):
    """A leaf's twin shape: scales keep their granularity (per tensor, channel, group, block)."""
    if leaf == "weight_packed":
        return (new[0], new[1] * t.shape[1] // src[1])
    if leaf in ("weight", "weight_shape"):
        return new if leaf == "weight" else tuple(t.shape)
    if leaf == "g_idx":
        return (new[1],)
    if leaf.startswith("weight_") and len(t.shape) == 2 and len(src) == 2:
        bo, bi = math.ceil(src[0] / t.shape[0]), math.ceil(src[1] / t.shape[1])
        return (math.ceil(new[0] / bo), math.ceil(new[1] / bi))
    return p.shape(name, tuple(t.shape))


def _module_tensors(
    module: str, leaves: dict[str, TensorInfo], p: shrink.Plan, in_mtp: bool, bits: int
) -> dict[str, torch.Tensor]:
    new_module = p.rename(f"{module}.x")
    assert new_module is not None
    new_module = new_module[:-2]
    src = _logical_source_shape(leaves, bits)
    out: dict[str, torch.Tensor] = {}
    if src is not None and len(src) == 2:
        new = p.shape(f"{module}.weight", src)
        shapes = {leaf: (t.dtype, _leaf_shape(module, leaf, t, src, new, p)) for leaf, t in leaves.items()}
        w = values.logical(new_module, "weight", new, in_mtp)
        for leaf, tensor in encode.encode(module, shapes, w, bits).items():
            out[f"{new_module}.{leaf}"] = tensor
        return out
    for leaf, t in leaves.items():
        shape = p.shape(f"{module}.{leaf}", tuple(t.shape))
        v = values.logical(new_module, leaf, shape, in_mtp)
        if leaf.endswith("_scale") or leaf.endswith("scale_inv"):
            v = torch.ones(shape)
        out[f"{new_module}.{leaf}"] = v.to(encode.dtype(t.dtype, f"{module}.{leaf}"))
    return out


def build(source: str | Path, dest: str | Path) -> Twin:
    started = time.perf_counter()
    inv = load_inventory(source)
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        if not (dest / MANIFEST).is_file():
            raise BadInput(f"{dest}: exists and is not a twin (refusing to overwrite)")
        shutil.rmtree(dest)
    p = shrink.plan(inv.config)
    n_src = num_hidden_layers(inv.config)
    bits = _num_bits(inv.config)
    shards: dict[str, dict[str, torch.Tensor]] = {f: {} for f in inv.shards}
    for module, leaves in group_modules(inv.tensors.values()).items():
        any_name = f"{module}.{next(iter(leaves))}"
        if p.rename(any_name) is None:
            continue
        file = next(iter(leaves.values())).file
        tensors = _module_tensors(module, leaves, p, is_mtp_name(any_name, n_src), bits)
        shards.setdefault(file, {}).update(tensors)
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _write(inv, p, shards, tmp)
    seconds = time.perf_counter() - started
    count = sum(len(s) for s in shards.values())
    manifest = {
        "source": str(Path(source).absolute()),
        "token": values.TOKEN,
        "decoy": values.DECOY,
        "layers": {str(k): v for k, v in sorted(p.layers.items())},
        "tensors": count,
        "seconds": round(seconds, 2),
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    if dest.exists():
        dest.rmdir()
    tmp.rename(dest)
    return Twin(dest, Path(source), count, seconds, values.TOKEN, p)


def _write(inv: Inventory, p: shrink.Plan, shards: dict[str, dict[str, torch.Tensor]], out: Path) -> None:
    from safetensors.torch import save_file

    weight_map: dict[str, str] = {}
    total = 0
    for file, tensors in shards.items():
        save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, str(out / file), metadata={"format": "pt"})
        for name, t in tensors.items():
            weight_map[name] = file
            total += t.numel() * t.element_size()
    if inv.index_path is not None:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        (out / inv.index_path.name).write_text(json.dumps(index, indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(p.config, indent=2) + "\n")
    skip = {"config.json", *inv.shards, *([inv.index_path.name] if inv.index_path else [])}
    for f in sorted(inv.root.iterdir()):
        if f.name in skip or not f.is_file() or f.name.startswith(".") or f.stat().st_size > _SMALL_FILE:
            continue
        if f.name == "hf_quant_config.json":
            data = json.loads(f.read_text())
            if isinstance(data, dict):
                shrink.renumber_quant_config(data, p)
            (out / f.name).write_text(json.dumps(data, indent=2) + "\n")
        elif f.suffix != ".safetensors":
            shutil.copyfile(f, out / f.name)
