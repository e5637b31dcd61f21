"""Time load_inventory on a DeepSeek-V4-Flash-scale sparse layout (46 shards, ~69,000 tensors).

Prints numbers, asserts nothing. Run: .venv/bin/python scripts/bench_inventory.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for fixtures/

from mtplint.inventory.checkpoint import load_inventory

from fixtures.sparse import write_sharded

LAYERS, EXPERTS, HIDDEN, MOE_INTER, SHARDS = 43, 256, 4096, 2048, 46


def dsv4_flash_layout() -> list[tuple[str, str, list[int]]]:
    t: list[tuple[str, str, list[int]]] = [("embed.weight", "BF16", [129280, HIDDEN])]
    for i in range(LAYERS + 1):  # the last one stands in for the MTP block
        p = f"layers.{i}" if i < LAYERS else "mtp.0"
        for name, shape in (
            ("attn.wq_a", [1024, HIDDEN]),
            ("attn.wq_b", [8192, 1024]),
            ("attn.wkv", [512, HIDDEN]),
            ("attn.wo_a", [8192, 4096]),
            ("attn.wo_b", [HIDDEN, 8192]),
            ("ffn.shared_experts.w1", [MOE_INTER, HIDDEN]),
            ("ffn.shared_experts.w2", [HIDDEN, MOE_INTER]),
            ("ffn.shared_experts.w3", [MOE_INTER, HIDDEN]),
        ):
            t.append((f"{p}.{name}.weight", "F8_E4M3", shape))
            t.append((f"{p}.{name}.scale", "F8_E8M0", [-(-shape[0] // 128), -(-shape[1] // 128)]))
        t += [
            (f"{p}.attn_norm.weight", "BF16", [HIDDEN]),
            (f"{p}.ffn_norm.weight", "BF16", [HIDDEN]),
            (f"{p}.attn.q_norm.weight", "BF16", [1024]),
            (f"{p}.attn.kv_norm.weight", "BF16", [512]),
            (f"{p}.attn.attn_sink", "F32", [64]),
            (f"{p}.ffn.gate.weight", "BF16", [EXPERTS, HIDDEN]),
            (f"{p}.ffn.gate.bias", "F32", [EXPERTS]),
        ]
        for e in range(EXPERTS):
            for w, (o, k) in (("w1", (MOE_INTER, HIDDEN)), ("w2", (HIDDEN, MOE_INTER)), ("w3", (MOE_INTER, HIDDEN))):
                t.append((f"{p}.ffn.experts.{e}.{w}.weight", "I8", [o, k // 2]))
                t.append((f"{p}.ffn.experts.{e}.{w}.scale", "F8_E8M0", [o, k // 32]))
    t += [("norm.weight", "BF16", [HIDDEN]), ("head.weight", "BF16", [129280, HIDDEN])]
    return t


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        layout = dsv4_flash_layout()
        t0 = time.perf_counter()
        write_sharded(root, layout, SHARDS)
        (root / "config.json").write_text(
            json.dumps(
                {
                    "model_type": "deepseek_v4",
                    "num_hidden_layers": LAYERS,
                    "num_nextn_predict_layers": 1,
                    "expert_dtype": "fp4",
                    "quantization_config": {
                        "quant_method": "fp8",
                        "activation_scheme": "dynamic",
                        "fmt": "e4m3",
                        "scale_fmt": "ue8m0",
                        "weight_block_size": [128, 128],
                    },
                }
            )
        )
        print(f"wrote {len(layout)} tensors in {SHARDS} sparse shards in {time.perf_counter() - t0:.2f} s")
        times, cpu = [], []
        inv = load_inventory(root)
        for _ in range(5):
            inv = None  # free the previous result outside the timed region
            t0, c0 = time.perf_counter(), time.process_time()
            inv = load_inventory(root)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        kinds: dict[str, int] = {}
        for m in inv.modules.values():
            kinds[m.kind] = kinds.get(m.kind, 0) + 1
        print(
            f"load_inventory: best {min(times) * 1000:.0f} ms wall ({min(cpu) * 1000:.0f} ms CPU), "
            f"median {sorted(times)[2] * 1000:.0f} ms over 5 runs after one warm-up; "
            f"{len(inv.tensors)} tensors, {len(inv.shards)} shards, {len(inv.modules)} modules"
        )
        print("module kinds:", ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))


if __name__ == "__main__":
    main()
