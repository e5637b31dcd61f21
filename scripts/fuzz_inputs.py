"""Fuzz mtplint's inventory load with mutated safetensors headers, weight-map indexes and configs.

Every input goes through mtplint.inventory.checkpoint.load_inventory, the entry point the CLI
runs before any probe. Each one ends accepted, as BadInput (exit 2), or as any other exception
(a defect: the count must be 0). Headers are also opened with the safetensors package: both
must accept or both reject, and what both accept must list the same tensors, dtypes and shapes
(differences must be 0). Indexes are also given to vLLM's own filter_duplicate_safetensors_files
(with --vllm-oracle): an index vLLM refuses must not be accepted (false cleans must be 0).

    .venv/bin/python scripts/fuzz_inputs.py --count 100000 --seed 1
    .venv/bin/python scripts/fuzz_inputs.py --count 2000 --kinds header --time-limit 30

Prints its figures and exits 1 when any other exception, difference or false clean was seen.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import random
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for fixtures/

KINDS = ("header", "index", "config")
WEIGHTS = {"header": 2, "index": 1, "config": 1}
INDEX = "model.safetensors.index.json"
PER_INPUT_TIMEOUT_S = 20


# ---------------------------------------------------------------------------------------------
# a JSON tree that can hold what a dict cannot: repeated keys and literal tokens (NaN, -0, 1e400)


class Obj(list):
    """An object as its (key, value) pairs, in order, repeats allowed."""


class Arr(list):
    pass


class Raw(str):
    """JSON text emitted as is."""


def tree(value: Any) -> Any:
    if isinstance(value, dict):
        return Obj((k, tree(v)) for k, v in value.items())
    if isinstance(value, list):
        return Arr(tree(v) for v in value)
    return value


def emit(node: Any, ascii_only: bool) -> str:
    if isinstance(node, Raw):
        return str(node)
    if isinstance(node, Obj):
        return "{" + ",".join(f"{emit(k, ascii_only)}:{emit(v, ascii_only)}" for k, v in node) + "}"
    if isinstance(node, Arr):
        return "[" + ",".join(emit(v, ascii_only) for v in node) + "]"
    return json.dumps(node, ensure_ascii=ascii_only)


def slots(node: Any) -> list[tuple[list, int]]:
    """Every (container, position) in the tree: the places a mutation can act on."""
    out: list[tuple[list, int]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (Obj, Arr)):
            for i, item in enumerate(n):
                out.append((n, i))
                stack.append(item[1] if isinstance(n, Obj) else item)
    return out


# ---------------------------------------------------------------------------------------------
# what mutations put in


def nested(rng: random.Random) -> Raw:
    depth = rng.choice([1, 2, 60, 63, 64, 65, 120, 124, 125, 126, 127, 128, 129, 200, 700, 999, 1000, 5000])
    if rng.random() < 0.5:
        return Raw("[" * depth + "1" + "]" * depth)
    return Raw('{"k":' * depth + "1" + "}" * depth)


def weird_number(rng: random.Random) -> Any:
    return rng.choice(
        [
            0,
            1,
            2,
            -1,
            True,
            False,
            None,
            1.0,
            2**31,
            2**32,
            2**61,
            2**62,
            2**63 - 1,
            2**63,
            2**64 - 1,
            Raw(str(2**64)),
            Raw(str(2**64 + 1)),
            Raw("-0"),
            Raw("-0.0"),
            Raw("1e400"),
            Raw("-1e400"),
            Raw("1e-400"),
            Raw("2e0"),
            Raw("NaN"),
            Raw("Infinity"),
            Raw("-Infinity"),
            Raw("9" * 308),
            Raw("9" * 309),
            Raw("9" * rng.choice([21, 400, 4300, 4301, 5000])),
            Raw("-" + "9" * rng.choice([19, 20, 400, 5000])),
            Raw("1" + "0" * 400 + "e-100"),
        ]
    )


def weird_string(rng: random.Random) -> Any:
    return rng.choice(
        [
            "",
            "a",
            "__metadata__",
            "dtype",
            "x" * 300,
            "x" * rng.choice([10_000, 100_000]),
            "\x1b[31mred\x1b[0m",
            "line\nbreak",
            "tab\tand\rcr",
            "nul\x00byte",
            "del\x7f",
            "ünïcödé",
            "😀",
            "\u2028sep",
            Raw('"\\ud800"'),
            Raw('"\\udc00"'),
            Raw('"a\\ud83d\\ude00b"'),
            Raw('"\\ude00\\ud83d"'),
            Raw('"\\ud83d\\u0041"'),
            Raw('"\\uD800"'),
            Raw('"\\\\ud800"'),
            Raw('"bad\\x"'),
            Raw('"ctrl\x01"'),
        ]
    )


def weird_value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.4:
        return weird_number(rng)
    if r < 0.7:
        return weird_string(rng)
    if r < 0.85:
        return nested(rng)
    return rng.choice([Obj(), Arr(), Arr([weird_number(rng)]), Obj([("a", None)]), Arr([1, 2, 3, 4])])


def mutate_tree(rng: random.Random, root: Any, keys: Callable[[random.Random], Any], values: Callable) -> None:
    """One structural mutation somewhere in `root`."""
    places = slots(root)
    if not places:
        return
    container, i = rng.choice(places)
    if isinstance(container, Obj):
        _mutate_pair(rng, container, i, keys, values)
        return
    op = rng.random()
    if op < 0.5:
        container[i] = values(rng)
    elif op < 0.65:
        del container[i]
    elif op < 0.8:
        container.insert(i, values(rng))
    else:
        container[i] = Arr([container[i]])


def _mutate_pair(rng: random.Random, obj: Obj, i: int, keys: Callable, values: Callable) -> None:
    k, v = obj[i]
    op = rng.random()
    if op < 0.3:
        obj[i] = (k, values(rng))
    elif op < 0.45:
        obj.insert(rng.randrange(len(obj) + 1), (k, values(rng) if rng.random() < 0.5 else v))  # a repeated key
    elif op < 0.55:
        del obj[i]
    elif op < 0.7:
        obj[i] = (keys(rng), v)
    elif op < 0.8:
        obj.append((keys(rng), values(rng)))
    elif op < 0.9:
        obj[i] = (k, Arr([v]) if rng.random() < 0.5 else Obj([(k, v)]))
    else:
        rng.shuffle(obj)


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    b = bytearray(data)
    op = rng.random()
    i = rng.randrange(len(b))
    if op < 0.35:
        b[i] = rng.randrange(256)
    elif op < 0.5:
        b[i] = rng.choice(b'{}[]":,-0123456789eE.\\ntfu \x00\xff\xc3')
    elif op < 0.65:
        del b[i : i + rng.randint(1, 8)]
    elif op < 0.8:
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    elif op < 0.9:
        del b[i:]
    else:
        j = rng.randrange(len(b))
        b[i:i] = b[min(i, j) : max(i, j)][:64]
    return bytes(b)


# ---------------------------------------------------------------------------------------------
# outcome bookkeeping


@dataclass
class Tally:
    inputs: int = 0
    accepted: int = 0
    bad_input: int = 0
    other: int = 0
    diffs: int = 0  # headers: verdict or content differs from safetensors; indexes: vLLM refuses, we accept
    oracle_checked: int = 0
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        if len(self.examples) < 5:
            self.examples.append(what)


class Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise Timeout


def outcome(load: Callable[[], Any], tally: Tally, label: Callable[[], str]) -> Any:
    """Run one load; returns the inventory, or None when it was refused as bad input."""
    from mtplint.core.errors import BadInput

    signal.alarm(PER_INPUT_TIMEOUT_S)
    try:
        inv = load()
    except BadInput as e:
        tally.bad_input += 1
        if "\n" in e.one_line():
            tally.other += 1
            tally.note(f"multi-line BadInput for {label()}: {e.one_line()[:200]!r}")
        return None
    except Timeout:
        tally.other += 1
        tally.note(f"timeout after {PER_INPUT_TIMEOUT_S} s on {label()}")
        return None
    except Exception:
        tally.other += 1
        tally.note(f"{label()}\n{traceback.format_exc(limit=6)}")
        return None
    finally:
        signal.alarm(0)
    tally.accepted += 1
    return inv


# ---------------------------------------------------------------------------------------------
# headers


def header_seeds() -> list[dict]:
    def e(dtype, shape, begin, end):
        return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}

    return [
        {
            "__metadata__": {"format": "pt"},
            "model.layers.0.mlp.down_proj.weight": e("F8_E4M3", [4, 4], 0, 16),
            "model.layers.0.mlp.down_proj.weight_scale": e("F32", [1], 16, 20),
            "model.norm.weight": e("BF16", [4], 20, 28),
        },
        {"a": e("F4", [4], 0, 2), "b": e("F32", [0, 3], 2, 2), "c": e("C64", [1], 2, 10), "d": e("U8", [], 10, 11)},
        {"w": e("I8", [2, 3], 0, 6), "s": e("F8_E8M0", [2, 1], 6, 8), "z": e("BOOL", [0], 8, 8)},
        {"__metadata__": None, "x": e("F6_E2M3", [4], 0, 3), "y": e("F8_E5M2FNUZ", [1, 1, 1, 1], 3, 4)},
        {},
    ]


def header_key(rng: random.Random) -> Any:
    return weird_string(rng) if rng.random() < 0.7 else rng.choice(["dtype", "shape", "data_offsets", "__metadata__"])


def header_value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.15:
        return rng.choice(["F32", "F4", "BF16", "F8_E4M3FNUZ", "f32", "F8_E4M3FN", "C128", Obj([("F32", None)])])
    if r < 0.3:
        return Arr(weird_number(rng) if rng.random() < 0.3 else rng.choice([0, 1, 2, 4, 8, 16]) for _ in range(2))
    if r < 0.4:
        return Arr([rng.choice(["F32", "U8"]), Arr([rng.randint(0, 4)]), Arr([0, rng.choice([0, 4, 8])])])
    return weird_value(rng)


def reshape_entries(rng: random.Random, root: Obj) -> None:
    """Mutations that keep a header loadable more often: array-form entries, enum-map dtypes,
    repeated tensor names, extra keys, reordering."""
    entries = [i for i, (k, v) in enumerate(root) if isinstance(v, Obj) and k != "__metadata__"]
    if not entries:
        return
    i = rng.choice(entries)
    k, v = root[i]
    fields = dict(v)
    op = rng.random()
    if op < 0.25 and {"dtype", "shape", "data_offsets"} <= fields.keys():
        root[i] = (k, Arr([fields["dtype"], fields["shape"], fields["data_offsets"]]))
    elif op < 0.45 and "dtype" in fields:
        v[:] = [(fk, Obj([(fv, None)]) if fk == "dtype" else fv) for fk, fv in v]
    elif op < 0.6:
        root.insert(rng.randrange(len(root) + 1), (k, v))
    elif op < 0.8:
        v.append((rng.choice(["x", "dtype", "shape", "data_offsets", "extra"]), header_value(rng)))
    else:
        rng.shuffle(root)


def data_length(text: str, default: int) -> int:
    """The data size the mutated header declares, when that is small: most mutants then stay loadable."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return default
    if not isinstance(obj, dict):
        return default
    ends = []
    for v in obj.values():
        offs = v.get("data_offsets") if isinstance(v, dict) else v[2] if isinstance(v, list) and len(v) == 3 else None
        if isinstance(offs, list) and len(offs) == 2 and type(offs[1]) is int and 0 <= offs[1] < 1 << 16:
            ends.append(offs[1])
    return max(ends, default=0)


class HeaderFuzz:
    def __init__(self, work: Path):
        self.root = work / "header"
        self.root.mkdir()
        (self.root / "config.json").write_text('{"model_type": "llama"}')
        self.shard = self.root / "model.safetensors"
        self.seeds = header_seeds()

    def make(self, rng: random.Random) -> bytes:
        seed = rng.choice(self.seeds)
        node = tree(seed)
        default = data_length(json.dumps(seed), 0)
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            if rng.random() < 0.35:
                reshape_entries(rng, node)
            else:
                mutate_tree(rng, node, header_key, header_value)
        text = emit(node, ascii_only=rng.random() < 0.3)
        if rng.random() < 0.2:
            text = rng.choice([" ", "\n", "\t", "\r", ""]) + text + " " * rng.randrange(8)
        body = text.encode("utf-8", "surrogatepass")
        n = data_length(text, default)
        if rng.random() < 0.25:
            body = mutate_bytes(rng, body)
        length = len(body)
        if rng.random() < 0.05:
            length = rng.choice([0, max(0, len(body) - 1), len(body) + 1, 100_000_001, 2**63, 2**64 - 1])
        data = bytes(max(0, n + (rng.choice([-1, 1]) if rng.random() < 0.05 else 0)))
        blob = struct.pack("<Q", length) + body + data
        if rng.random() < 0.02:
            blob = blob[: rng.randrange(12)]
        return blob

    def run_one(self, rng: random.Random, tally: Tally) -> None:
        from mtplint.inventory.checkpoint import load_inventory
        from safetensors import safe_open

        blob = self.make(rng)
        self.shard.write_bytes(blob)
        inv = outcome(lambda: load_inventory(self.root), tally, lambda: f"header {blob[:300]!r}")
        try:
            with safe_open(str(self.shard), "pt") as f:
                names = f.keys()
                theirs = {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in names}
        except Exception:
            theirs = None
        tally.oracle_checked += 1
        ours = None if inv is None else {t.name: (t.dtype, t.shape) for t in inv.tensors.values()}
        if (ours is None) != (theirs is None) or (ours is not None and ours != theirs):
            tally.diffs += 1
            verdict = "accepts" if ours is not None else "rejects"
            tally.note(f"mtplint {verdict}, safetensors {'rejects' if theirs is None else 'accepts'}: {blob[:300]!r}")


# ---------------------------------------------------------------------------------------------
# indexes


def write_shard(path: Path, names: list[str]) -> None:
    from fixtures.sparse import write_sparse

    write_sparse(path, [(n, "BF16", (2, 2)) for n in names])


class IndexFuzz:
    """A directory holding everything a weight_map entry can point at: shards, a shard in a
    subdirectory, a hidden one, a directory, a FIFO, links in and out, a dangling link."""

    def __init__(self, work: Path, oracle: Callable | None):
        self.root = root = work / "index"
        outside = work / "outside"
        root.mkdir()
        outside.mkdir()
        (root / "config.json").write_text('{"model_type": "llama"}')
        write_shard(root / "a.safetensors", ["t0", "t1"])
        write_shard(root / "b.safetensors", ["t2"])
        write_shard(root / "sub" / "c.safetensors", ["t3"])
        write_shard(root / ".hidden.safetensors", ["t3"])
        write_shard(outside / "x.safetensors", ["t3"])
        (root / "dir.safetensors").mkdir()
        os.mkfifo(root / "fifo.safetensors")
        (root / "link.safetensors").symlink_to(outside / "x.safetensors")
        (root / "inner-link.safetensors").symlink_to("b.safetensors")
        (root / "dangling.safetensors").symlink_to(outside / "gone.safetensors")
        (root / "model.bin").write_bytes(b"\0" * 16)
        self.oracle = oracle
        self.names = [
            "a.safetensors",
            "b.safetensors",
            "../index/a.safetensors",
            "../outside/x.safetensors",
            str(root / "a.safetensors"),
            str(outside / "x.safetensors"),
            "/etc/passwd",
            "/dev/zero",
            "sub/c.safetensors",
            "./a.safetensors",
            "sub/../a.safetensors",
            ".hidden.safetensors",
            "dir.safetensors",
            "fifo.safetensors",
            "link.safetensors",
            "inner-link.safetensors",
            "dangling.safetensors",
            "model.bin",
            "a" * 300 + ".safetensors",
            "a" * 250 + ".safetensors",
            "\x1b[31mx.safetensors",
            "a.safetensors\n",
            "",
            ".safetensors",
            "a.safetensors/",
            "A.SAFETENSORS",
            "a.safetensors\x00",
            "config.json",
            "..",
            ".",
        ]

    def base(self) -> dict:
        return {
            "metadata": {"total_size": 24},
            "weight_map": {"t0": "a.safetensors", "t1": "a.safetensors", "t2": "b.safetensors"},
        }

    def make(self, rng: random.Random) -> bytes:
        index = self.base()
        wm = index["weight_map"]
        for _ in range(rng.choice([0, 1, 1, 2])):
            r = rng.random()
            if r < 0.5:
                wm[rng.choice(["t0", "t1", "t2", "t3"])] = rng.choice(self.names)
            elif r < 0.6:
                wm.pop(rng.choice(["t0", "t1", "t2"]), None)
            elif r < 0.7:
                # one shard swapped for its link, or the other way: both load in vLLM
                wm.update({"t2": rng.choice(["inner-link.safetensors", "b.safetensors"])})
            else:
                wm["t3"] = "link.safetensors"
        node = tree(index)
        if rng.random() < 0.4:
            mutate_tree(rng, node, lambda r: weird_string(r) if r.random() < 0.5 else "weight_map", weird_value)
        body = emit(node, ascii_only=rng.random() < 0.3).encode("utf-8", "surrogatepass")
        if rng.random() < 0.15:
            body = mutate_bytes(rng, body)
        return body

    def run_one(self, rng: random.Random, tally: Tally) -> None:
        from mtplint.inventory.checkpoint import load_inventory

        body = self.make(rng)
        (self.root / INDEX).write_bytes(body)
        inv = outcome(lambda: load_inventory(self.root), tally, lambda: f"index {body[:300]!r}")
        if self.oracle is None:
            return
        tally.oracle_checked += 1
        try:
            self.oracle(glob.glob(os.path.join(self.root, "*.safetensors")), str(self.root), INDEX)
            vllm_ok = True
        except Exception:
            vllm_ok = False
        if inv is not None and not vllm_ok:
            tally.diffs += 1
            tally.note(f"vLLM refuses this index, mtplint accepts it: {body[:300]!r}")


# ---------------------------------------------------------------------------------------------
# configs


def config_seeds() -> list[tuple[dict, dict | None]]:
    ct_fp8 = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "quantization_status": "compressed",
        "ignore": ["lm_head"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False},
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
            }
        },
    }
    base = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 4, "architectures": ["LlamaForCausalLM"]}
    return [
        (base, None),
        ({**base, "quantization_config": ct_fp8}, None),
        ({**base, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, None),
        (
            {**base, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}},
            None,
        ),
        (base, {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "exclude_modules": ["x"]}}),
        ({**base, "quantization_config": {"quant_method": "gptq", "bits": 4, "dynamic": {"-:.*mlp.*": {}}}}, None),
        ({**base, "quantization_config": {"quant_method": "awq", "modules_to_not_convert": ["lm_head"]}}, None),
        ({**base, "model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4"}}, None),
        ({**base, "text_config": {"quantization_config": {"quant_method": "fp8"}}}, None),
    ]


def config_key(rng: random.Random) -> Any:
    if rng.random() < 0.5:
        return weird_string(rng)
    return rng.choice(
        ["quantization_config", "compression_config", "quant_method", "ignore", "config_groups", "quantization",
         "quant_algo", "weight_block_size", "dynamic", "exclude_modules", "modules_to_not_convert", "producer",
         "quantized_layers", "kv_cache_scheme", "text_config", "model_type", "targets", "weights"]
    )  # fmt: skip


def config_value(rng: random.Random) -> Any:
    if rng.random() < 0.2:
        return rng.choice(
            ["compressed-tensors", "modelopt", "modelopt_fp4", "fp8", "gptq", "awq", "MIXED_PRECISION", "NVFP4",
             Arr(["lm_head"]), Arr([1]), Obj([("name", "modelopt")]), Obj()]
        )  # fmt: skip
    return weird_value(rng)


class ConfigFuzz:
    def __init__(self, work: Path):
        self.root = work / "config"
        self.root.mkdir()
        write_shard(self.root / "model.safetensors", ["model.layers.0.mlp.down_proj.weight", "lm_head.weight"])
        self.seeds = config_seeds()

    def make(self, rng: random.Random) -> tuple[bytes, bytes | None]:
        config, hq = rng.choice(self.seeds)
        target = rng.random() < 0.25 and hq is not None
        node = tree(hq if target else config)
        for _ in range(rng.choice([1, 1, 2, 3])):
            mutate_tree(rng, node, config_key, config_value)
        body = emit(node, ascii_only=rng.random() < 0.3).encode("utf-8", "surrogatepass")
        if rng.random() < 0.15:
            body = mutate_bytes(rng, body)
        other = json.dumps(config if target else hq).encode() if (target or hq is not None) else None
        return (other, body) if target else (body, other)

    def run_one(self, rng: random.Random, tally: Tally) -> None:
        from mtplint.inventory.checkpoint import load_inventory

        config, hq = self.make(rng)
        (self.root / "config.json").write_bytes(config or b"{}")
        hq_path = self.root / "hf_quant_config.json"
        if hq is None:
            hq_path.unlink(missing_ok=True)
        else:
            hq_path.write_bytes(hq)
        outcome(lambda: load_inventory(self.root), tally, lambda: f"config {config[:300]!r} hq {(hq or b'')[:200]!r}")


# ---------------------------------------------------------------------------------------------


def vllm_filter() -> Callable | None:
    try:
        from vllm.model_executor.model_loader.weight_utils import filter_duplicate_safetensors_files
    except Exception:
        return None
    return filter_duplicate_safetensors_files


def fuzz(
    count: int,
    seed: int = 0,
    kinds: tuple[str, ...] = KINDS,
    time_limit: float | None = None,
    vllm_oracle: bool = False,
    work_dir: str | None = None,
) -> dict[str, Tally]:
    """Run `count` inputs (fewer if `time_limit` seconds run out first); returns a Tally per kind."""
    base = work_dir or ("/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None)
    work = Path(tempfile.mkdtemp(prefix="mtplint-fuzz-", dir=base))
    old_cache = os.environ.get("MTPLINT_CACHE_DIR")
    os.environ["MTPLINT_CACHE_DIR"] = str(work / "cache")  # memo and declared-config entries stay in here
    old_alarm = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        rng = random.Random(seed)
        runners: dict[str, Any] = {}
        for k in kinds:
            if k == "header":
                runners[k] = HeaderFuzz(work)
            elif k == "index":
                runners[k] = IndexFuzz(work, vllm_filter() if vllm_oracle else None)
            else:
                runners[k] = ConfigFuzz(work)
        tallies = {k: Tally() for k in kinds}
        schedule = [k for k in kinds for _ in range(WEIGHTS[k])]
        deadline = None if time_limit is None else time.monotonic() + time_limit
        for i in range(count):
            if deadline is not None and time.monotonic() > deadline:
                break
            kind = schedule[i % len(schedule)]
            tally = tallies[kind]
            t0 = time.perf_counter()
            runners[kind].run_one(random.Random(rng.getrandbits(64)), tally)
            tally.seconds += time.perf_counter() - t0
            tally.inputs += 1
            if i % 2000 == 1999:
                shutil.rmtree(work / "cache", ignore_errors=True)
        return tallies
    finally:
        signal.signal(signal.SIGALRM, old_alarm)
        if old_cache is None:
            os.environ.pop("MTPLINT_CACHE_DIR", None)
        else:
            os.environ["MTPLINT_CACHE_DIR"] = old_cache
        with contextlib.suppress(OSError):
            shutil.rmtree(work)


def report(tallies: dict[str, Tally], wall: float, oracle: str) -> bool:
    total = sum(t.inputs for t in tallies.values())
    print(f"{total} inputs in {wall:.1f} s ({total / max(wall, 1e-9):.0f}/s); index oracle: {oracle}")
    head = ("kind", "inputs", "rate/s", "accepted", "BadInput", "other", "checked", "diffs")
    print(f"{head[0]:<8} " + " ".join(f"{h:>9}" for h in head[1:]))
    for kind, t in tallies.items():
        rate = t.inputs / t.seconds if t.seconds else 0.0
        cells = (t.inputs, f"{rate:.0f}", t.accepted, t.bad_input, t.other, t.oracle_checked, t.diffs)
        print(f"{kind:<8} " + " ".join(f"{c:>9}" for c in cells))
    clean = True
    for kind, t in tallies.items():
        for ex in t.examples:
            clean = False
            print(f"--- {kind}: {ex}")
    return clean and all(t.other == 0 and t.diffs == 0 for t in tallies.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=None, help="stop after this many seconds")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of " + ",".join(KINDS))
    ap.add_argument(
        "--vllm-oracle",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check indexes against vLLM's own filter_duplicate_safetensors_files (imports vLLM: ~10 s)",
    )
    ap.add_argument("--work-dir", default=None, help="where to write inputs (default: /dev/shm when writable)")
    args = ap.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not kinds or any(k not in KINDS for k in kinds):
        ap.error(f"--kinds takes a subset of {','.join(KINDS)}")
    oracle = "off"
    if args.vllm_oracle and "index" in kinds:
        oracle = "vLLM filter_duplicate_safetensors_files" if vllm_filter() else "unavailable (vLLM not importable)"
    t0 = time.perf_counter()
    tallies = fuzz(args.count, args.seed, kinds, args.time_limit, args.vllm_oracle, args.work_dir)
    return 0 if report(tallies, time.perf_counter() - t0, oracle) else 1


if __name__ == "__main__":
    sys.exit(main())
