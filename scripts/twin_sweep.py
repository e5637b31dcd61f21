"""Twin every fixture recipe and every layout rebuilt from ../shared/real-checkpoints; print
which got a twin, which named an engine limit, and which failed (the twin's own limit).

    python scripts/twin_sweep.py [--only SUBSTR] [--real-only] [--fixtures-only]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL = ROOT.parent / "shared" / "real-checkpoints"

# slug -> (layout generator family, config edits): real published configs, tensors from the
# family's official layout generator (names filtered by the real index where there is one).
REAL_LAYOUTS = {
    "deepseek-r1": ("deepseek_v3", None),
    "glm-5.1": ("glm5", None),
    "glm-5.1-fp8": ("glm5", None),
    "mimo-7b-kor": ("mimo", None),
    "qwen35-moe-reap-18b": ("qwen35_moe", None),
    "qwen35-moe-reap-25b": ("qwen35_moe", None),
    "qwen36-27b-fp8": ("qwen35", None),
    # Layouts like those users publish from these: other expert counts (REAP-style pruning),
    # a renamed fine-tune with a resized vocabulary, other widths and head counts.
    "deepseek-r1@experts-192": ("deepseek_v3", {"n_routed_experts": 192}),
    "deepseek-r1@heads-64-qlora-1024": ("deepseek_v3", {"num_attention_heads": 64, "q_lora_rank": 1024}),
    "qwen35-moe-reap-18b@experts-96": ("qwen35_moe", {"num_experts": 96}),
    "qwen35-moe-reap-25b@hidden-4096": ("qwen35_moe", {"hidden_size": 4096, "moe_intermediate_size": 1024}),
    "qwen36-27b-fp8@finetune-vocab-151936": ("qwen35", {"vocab_size": 151936, "_name_or_path": "me/qwen36-ft"}),
    "glm-5.1@experts-160-heads-32": ("glm5", {"n_routed_experts": 160, "num_attention_heads": 32}),
    "mimo-7b-kor@hidden-2048": ("mimo", {"hidden_size": 2048, "intermediate_size": 5632}),
}


def real_layout(slug: str, dest: Path) -> Path:
    from fixtures import layouts
    from fixtures.sparse import write_shard_groups

    family, edits = REAL_LAYOUTS[slug]
    slug = slug.split("@")[0]
    cfg = json.loads((REAL / slug / "config.json").read_text())
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    for key, value in (edits or {}).items():
        (cfg if key.startswith("_") else text)[key] = value
    flat = "text_config" not in cfg and family == "qwen35_moe"
    gen_cfg = {"text_config": cfg, "vision_config": None} if flat else cfg
    if flat:  # the REAP exports: a flat text config, no vision tower
        layouts_vision, layouts._qwen35_vision = layouts._qwen35_vision, lambda v: []
    try:
        tensors = layouts.LAYOUTS[family](gen_cfg)
    finally:
        if flat:
            layouts._qwen35_vision = layouts_vision
    index = REAL / slug / "model.safetensors.index.json"
    if index.is_file():
        names = json.loads(index.read_text())["weight_map"]
        dtype = "F16" if cfg.get("dtype", cfg.get("torch_dtype")) == "float16" else None
        shapes = {n: (d, s) for n, d, s in tensors}
        H, moe = cfg.get("hidden_size"), cfg.get("moe_intermediate_size")
        kept = []
        for n in names:
            m = re.search(r"\.experts\.\d+\.(gate|up|down)_proj\.weight$", n)
            if n in shapes:
                kept.append((n, dtype or shapes[n][0], shapes[n][1]))
            elif m and H and moe:  # experts stored one tensor per expert
                kept.append((n, dtype or "BF16", (H, moe) if m.group(1) == "down" else (moe, H)))
        if kept:
            tensors = kept
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(cfg, indent=2))
    write_shard_groups(dest, [tensors], name_fmt=None)
    return dest


def probe_twin(path: Path) -> str:
    """The twin's load through vLLM's own classes (the lint's probe): shape errors are the twin's."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", "check", str(path), "--format", "json", "--trust-remote-code"],
        capture_output=True,
        text=True,
    )
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
    shape = [f for f in report["findings"] if "size" in f["message"] and "load_weights() fails" in f["message"]]
    return f"exit {proc.returncode}, shape mismatches {len(shape)}" + (
        f": {shape[0]['message'][:200]}" if shape else ""
    )


def one(name: str, make, a) -> str:
    from mtplint.core.errors import BadInput
    from mtplint.twin.build import build

    tmp = Path(tempfile.mkdtemp(prefix="twin-sweep-"))
    try:
        src = make(tmp)
        t = build(src, tmp / "twin")
        note = f" ({t.note})" if t.note else ""
        size = sum(f.stat().st_blocks * 512 for f in t.path.iterdir() if f.is_file())
        hidden = ""
        if t.plan is not None:
            h, h2 = t.plan.hidden
            hidden = f", hidden {h} -> {h2}" + (" (NOT SHRUNK)" if h2 >= h and h > 256 else "")
        big = " (OVER 300 MB)" if size > 300 * 2**20 else ""
        print(f"ok     {name}: {t.tensors} tensors, {size / 2**20:.1f} MB{big}{hidden}{note}", flush=True)
        if a.probe:
            print(f"       probe: {probe_twin(t.path)}", flush=True)
        return "ok"
    except BadInput as exc:
        print(f"FAIL   {name}: exit 2: {exc}", flush=True)
        return "fail"
    except Exception as exc:
        if type(exc).__name__ in ("TwinLimit", "Unsupported"):
            print(f"limit  {name}: {exc}", flush=True)
            return "limit"
        print(f"FAIL   {name}: {type(exc).__name__}: {exc}", flush=True)
        if a.v:
            traceback.print_exc()
        return "fail"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--skip", action="append", default=[], help="leave out the cases whose name holds this")
    ap.add_argument("--from", dest="start", help="skip the cases before this one")
    ap.add_argument("--real-only", action="store_true")
    ap.add_argument("--fixtures-only", action="store_true")
    ap.add_argument("-v", action="store_true")
    ap.add_argument(
        "--probe",
        action="store_true",
        help="also lint each twin (vLLM's own construction on meta tensors) and count its load errors",
    )
    a = ap.parse_args()
    from fixtures.build import cached_build, list_recipes

    cases: list[tuple[str, object]] = []
    if not a.real_only:
        cases += [(r, lambda d, r=r: cached_build(r)) for r in list_recipes()]
    if not a.fixtures_only:
        cases += [(f"real:{s}", lambda d, s=s: real_layout(s, d / "src")) for s in REAL_LAYOUTS]
    if a.start:
        cases = cases[[n for n, _ in cases].index(a.start) :]
    counts = {"ok": 0, "limit": 0, "fail": 0}
    for name, make in cases:
        if (a.only and a.only not in name) or any(s in name for s in a.skip):
            continue
        counts[one(name, make, a)] += 1
    ok, limit, fail = counts["ok"], counts["limit"], counts["fail"]
    print(f"twin: {ok} built, {limit} engine/twin limits named, {fail} failed, of {ok + limit + fail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
