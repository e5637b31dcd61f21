"""Twin every fixture recipe, every tiny real-weight checkpoint (fixtures/tiny_real.py,
fixtures/tiny_export.py) and every layout rebuilt from ../shared/real-checkpoints (quantized
exports of them included); print which got a twin, which named an engine limit, and which
failed (the twin's own limit).

    python scripts/twin_sweep.py [--only SUBSTR ...]
        [--real-only | --fixtures-only | --tiny-only | --pairs-only | --external] [--probe]

`--fixtures-only` also twins each separate draft recipe beside its target's twin (`pair:` cases).
--external: the hidden check's stand-in, layouts the project's generators never wrote
(fixtures/external_layouts.py: transformers' own trunks, other tools' quantized formats, export
quirks); only those.
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
    "deepseek-v4-flash-0731-dspark": ("deepseek_v4_flash", None),
}
# Bases with no stored published config of their own: the family's fixture config (copied from
# the published one) quantized as published exports are.
FIXTURE_BASES = {"glm-ocr": ("glm_ocr", None)}

# Quantized exports of those layouts, as people publish them: slug -> (base real layout, the
# steps). A step is a fixture recipe whose transforms and mutations are replayed on the real
# layout (the project's own quantizer imitations), or one of the sweep's own steps below
# (`own-fp8`: the FP8 tensors and scales the real config's own quantization_config describes;
# `nvfp4-hf-quant-config`: ModelOpt NVFP4 with a published hf_quant_config.json's exclusions).
QUANTIZED_LAYOUTS = {
    # cognitivecomputations-style DeepSeek-R1 AWQ: every trunk Linear 4-bit, the MTP layer BF16
    "deepseek-r1@awq-bf16-mtp": ("deepseek-r1", ["dsv3-awq-bf16-mtp"]),
    "deepseek-r1@experts-192@awq-bf16-mtp": ("deepseek-r1@experts-192", ["dsv3-awq-bf16-mtp"]),
    # an NVFP4 DeepSeek-V3/R1 with the published ModelOpt exclusions (`model.layers.61*`)
    "deepseek-r1@nvfp4-modelopt": ("deepseek-r1", ["nvfp4-hf-quant-config"]),
    "deepseek-r1@nvfp4-mtp-quantized": ("deepseek-r1", ["dsv3-nvfp4-mtp-head-omitted"]),
    # Qwen3.6-27B-FP8 with its FP8 tensors and block scales (its own ignore list kept BF16)
    "qwen36-27b-fp8@fp8-tensors": ("qwen36-27b-fp8", ["own-fp8"]),
    "qwen36-27b-fp8@finetune-vocab-151936@fp8-tensors": ("qwen36-27b-fp8@finetune-vocab-151936", ["own-fp8"]),
    # Qwen3.6-27B AutoRound AWQ and GPTQ exports (the Qwen3.5 recipes' quantizers)
    "qwen36-27b-fp8@autoround-awq": ("qwen36-27b-fp8", ["drop-quant", "qwen35-awq-autoround-shard-names"]),
    "qwen36-27b-fp8@gptq": ("qwen36-27b-fp8", ["drop-quant", "qwen35-gptq"]),
    "qwen36-27b-fp8@gptq-gdn-z-bf16": ("qwen36-27b-fp8", ["drop-quant", "qwen35-gptq-gdn-z-bf16"]),
    # REAP-pruned Qwen3.5 MoE exports quantized (per-expert tensors as the real index stores them)
    "qwen35-moe-reap-25b@gptq": ("qwen35-moe-reap-25b", ["qwen35-moe-gptq-no-mtp"]),
    "qwen35-moe-reap-18b@autoround-int4": ("qwen35-moe-reap-18b", ["qwen35-moe-autoround-int4"]),
    "qwen35-moe-reap-18b@experts-96@quark-mxfp4": ("qwen35-moe-reap-18b@experts-96", ["qwen35-moe-quark-mxfp4"]),
    # GLM-5.1-FP8 with its FP8 tensors; GLM-5.1 in ModelOpt NVFP4
    "glm-5.1-fp8@fp8-tensors": ("glm-5.1-fp8", ["own-fp8"]),
    "glm-5.1@nvfp4": ("glm-5.1", ["glm5-nvfp4-mtp-head-excluded"]),
    # MiMo-7B fine-tune in compressed-tensors W4A16 / FP8
    "mimo-7b-kor@ct-w4a16": ("mimo-7b-kor", ["mimo-ct-w4a16"]),
    "mimo-7b-kor@ct-fp8": ("mimo-7b-kor", ["mimo-ct-fp8"]),
    # DeepSeek-V4-Flash-0731 (its published config): NVFP4 experts with the DSpark MTP blocks,
    # and the W4A16 export that keeps its MTP block BF16
    "deepseek-v4-flash-0731-dspark@nvfp4-dspark": ("deepseek-v4-flash-0731-dspark", ["dsv4-flash-nvfp4-dspark"]),
    "deepseek-v4-flash-0731-dspark@w4a16-bf16mtp": ("deepseek-v4-flash-0731-dspark", ["dsv4-flash-w4a16-bf16mtp"]),
    # GLM-OCR: block FP8 text model (vision tower and MTP eh_proj BF16), and AWQ with a BF16 MTP layer
    "glm-ocr@fp8": ("glm-ocr", ["glm-ocr-fp8"]),
    "glm-ocr@awq-bf16-mtp": ("glm-ocr", ["glm-ocr-awq"]),
}


def _text(cfg: dict) -> dict:
    return cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg


def _real_tensors(slug: str) -> tuple[dict, list]:
    """The real config (with the slug's edits) and its tensors from the family's generator."""
    from fixtures import layouts

    family, edits = {**REAL_LAYOUTS, **FIXTURE_BASES}[slug]
    slug = slug.split("@")[0]
    if slug in FIXTURE_BASES:
        cfg = layouts.load_config(family)
    else:
        cfg = json.loads((REAL / slug / "config.json").read_text())
    text = _text(cfg)
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
    return cfg, tensors


def _excluded(module: str, entries: list[str]) -> bool:
    """A quantizer's not-convert entry names the module or a module above it."""
    return any(module == e or module.startswith(e + ".") for e in entries)


def _own_fp8(ck):
    """Block FP8 over every Linear the config's own quantization_config does not exclude, that
    quantization_config kept as published."""
    from fixtures import transforms

    qc = ck.config.get("quantization_config") or _text(ck.config).get("quantization_config")
    entries = list(qc.get("modules_to_not_convert") or []) + list(qc.get("ignored_layers") or [])
    mods = [
        m
        for m in transforms.linear_modules(ck.tensors)
        if not _excluded(m, entries) and not re.search(r"(embed_tokens|lm_head|\.head|\.gate)$", m)
    ]
    ck = transforms.dequantize(ck)
    ck = _on_modules(
        ck, mods, lambda c: transforms.fp8_block(c, ["re:"], block=tuple(qc.get("weight_block_size") or (128, 128)))
    )
    ck.config["quantization_config"] = qc
    return ck


def _on_modules(ck, mods, transform):
    """A transform applied to these modules only (named one by one, a list of 10^4-10^5 names is
    quadratic in the transforms' pattern matching): run on their tensors, the rest kept."""
    chosen = set(mods)
    inside = [t for t in ck.tensors if t[0].rsplit(".", 1)[0] in chosen]
    part = ck.copy()
    part.tensors = inside
    part = transform(part)
    ck.config, ck.hf_quant_config = part.config, part.hf_quant_config
    ck.tensors = [t for t in ck.tensors if t[0].rsplit(".", 1)[0] not in chosen] + part.tensors
    return ck


def _nvfp4_hf_quant_config(ck):
    """ModelOpt NVFP4 with the published DeepSeek-R1 hf_quant_config.json's exclusions (globs)."""
    from fnmatch import translate

    from fixtures import transforms

    hf = json.loads((REAL / "deepseek-r1-nvfp4-hf-quant-config" / "hf_quant_config.json").read_text())
    exclude = hf["quantization"]["exclude_modules"]
    excluded = re.compile("|".join(translate(e) for e in exclude))  # ModelOpt's globs, one regex
    ck = transforms.dequantize(ck)
    mods = [
        m
        for m in transforms.linear_modules(ck.tensors)
        if m.startswith("model.layers.") and not excluded.match(m) and not m.endswith((".gate", ".eh_proj", ".head"))
    ]
    ck = _on_modules(
        ck, mods, lambda c: transforms.modelopt_nvfp4(c, ["re:"], exclude_modules=exclude, form="hf_quant_config")
    )
    ck.hf_quant_config = hf  # as published, byte for byte in content
    ck.config.pop("quantization_config", None)
    return ck


def _steps(ck, steps: list[str]):
    from fixtures import build as fixture_build
    from fixtures import mutations, transforms

    for step in steps:
        if step == "own-fp8":
            ck = _own_fp8(ck)
        elif step == "nvfp4-hf-quant-config":
            ck = _nvfp4_hf_quant_config(ck)
        elif step == "glm-ocr-fp8":
            ck = transforms.fp8_block(
                ck,
                [r"re:^model\.language_model\.layers\.\d+\.(self_attn|mlp)\."],
                modules_to_not_convert=["model.visual"],
            )
        elif step == "glm-ocr-awq":
            text = r"re:^model\.language_model\.layers\.\d+\.(self_attn|mlp)\."
            ck = transforms.awq(ck, [text], skip=[r"re:^model\.language_model\.layers\.16\."])
        elif step == "drop-quant":
            ck.config.pop("quantization_config", None)
            _text(ck.config).pop("quantization_config", None)
        else:
            r = fixture_build.load_recipe(step)
            for kind, table in (("transforms", transforms.TRANSFORMS), ("mutations", mutations.MUTATIONS)):
                for params in r.get(kind, []):
                    params = dict(params)
                    ck = table[params.pop("kind")](ck, **fixture_build._resolve(ck, params))
    return ck


def real_layout(slug: str, dest: Path) -> Path:
    from fixtures.sparse import write_shard_groups
    from fixtures.transforms import Checkpoint

    base, steps = QUANTIZED_LAYOUTS.get(slug, (slug, []))
    cfg, tensors = _real_tensors(base)
    ck = _steps(Checkpoint(family={**REAL_LAYOUTS, **FIXTURE_BASES}[base][0], config=cfg, tensors=tensors), steps)
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(ck.config, indent=2))
    if ck.hf_quant_config is not None:
        (dest / "hf_quant_config.json").write_text(json.dumps(ck.hf_quant_config, indent=4) + "\n")
    write_shard_groups(dest, [ck.tensors], name_fmt=None)
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


def tiny_cases() -> list[tuple[str, object]]:
    """The tiny real-weight checkpoints (hidden 128, MiMo and GLM-4.5 classes): `twin` serves
    them as they are; `tiny-shrunk:` forces the structure twin on them (sizes already small)."""
    from fixtures import tiny_export, tiny_real

    def export(d: Path, graft: bool) -> Path:
        return tiny_export.quantized_export(tiny_export.release(d / "release"), d / "src", graft_mtp=graft)

    makers: list[tuple[str, object]] = [
        (f"{f}-{v}", lambda d, f=f, v=v: tiny_real.build(d / "src", f, v))
        for f in tiny_real.FAMILIES
        for v in tiny_real.VARIANTS
    ]
    makers += [
        ("glm45-export-release", lambda d: tiny_export.release(d / "src")),
        ("glm45-export-w4a16-mtp-grafted", lambda d: export(d, True)),
        ("glm45-export-w4a16-mtp-dropped", lambda d: export(d, False)),
    ]
    return [(f"{kind}:{n}", m) for kind in ("tiny", "tiny-shrunk") for n, m in makers]


def pair_cases() -> list[tuple[str, object]]:
    """Every separate draft recipe with the target its [expect] names: the target's twin keeping the
    layers the draft reads, the draft's twin following it (as `verify --draft` serves them)."""
    from fixtures.build import cached_build, list_recipes, load_recipe

    out: list[tuple[str, object]] = []
    for r in list_recipes():
        target = load_recipe(r).get("expect", {}).get("target")
        if target:
            out.append((f"pair:{r}", lambda d, r=r, t=target: (cached_build(t), cached_build(r))))
    return out


def one_pair(name: str, make, a) -> str:
    from mtplint.twin.build import build, draft_reads_layers
    from mtplint.twin.shrink import Follow

    tmp = Path(tempfile.mkdtemp(prefix="twin-sweep-"))
    try:
        target, draft = make(tmp)
        t = build(target, tmp / "target", as_is=False, min_layers=draft_reads_layers(draft))
        assert t.plan is not None
        d = build(draft, tmp / "draft", as_is=False, follow=Follow.of(t.plan))
        layers = json.loads((t.path / "config.json").read_text()).get("num_hidden_layers")
        print(f"ok     {name}: target {t.tensors} tensors ({layers} layers), draft {d.tensors} tensors", flush=True)
        if a.probe:
            print(f"       probe: {probe_pair(t.path, d.path, target, draft)}", flush=True)
        return "ok"
    except Exception as exc:
        return _failed(name, exc, a.v)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _lint_pair(target: Path, draft: Path, method: str | None = None) -> tuple[str | None, list[str], str]:
    """(the method vLLM resolved, the finding codes, a failure line or '') of `check TARGET --draft DRAFT`."""
    import subprocess

    cmd = [sys.executable, "-m", "mtplint", "check", str(target), "--draft", str(draft), "--format", "json"]
    proc = subprocess.run([*cmd, *(["--method", method] if method else [])], capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return None, [], f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
    return report["inputs"].get("method"), sorted(f"{f['code']} {f['severity']}" for f in report["findings"]), ""


def probe_pair(target: Path, draft: Path, src_target: Path, src_draft: Path) -> str:
    """The pair of twins through the lint's probe beside the source pair: the same findings? The
    twins are linted with the method vLLM resolved for the source (a twin's directory name says
    nothing: vLLM reads `eagle3` from the source's path)."""
    method, src, bad = _lint_pair(src_target, src_draft)
    if bad:
        return f"source: {bad}"
    _, twin, bad = _lint_pair(target, draft, method)
    if bad:
        return f"twins: {bad}"
    # by kind (code and severity): the twin drops layers, so a per-layer finding counts fewer times
    same = sorted(set(src)) == sorted(set(twin))
    return f"method {method}, {'same findings' if same else 'DIFFERENT findings'}: source {src}, twins {twin}"


def one(name: str, make, a) -> str:
    from mtplint.twin.build import build

    tmp = Path(tempfile.mkdtemp(prefix="twin-sweep-"))
    try:
        src = make(tmp)
        t = build(src, tmp / "twin", as_is=False if name.startswith("tiny-shrunk:") else None)
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
    except Exception as exc:
        return _failed(name, exc, a.v)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _failed(name: str, exc: Exception, verbose: bool) -> str:
    """'limit' for a named twin limit, else 'fail' (a bad-input exit 2 is the twin's failure too)."""
    from mtplint.core.errors import BadInput

    if isinstance(exc, BadInput):
        print(f"FAIL   {name}: exit 2: {exc}", flush=True)
        return "fail"
    if type(exc).__name__ in ("TwinLimit", "Unsupported"):
        print(f"limit  {name}: {exc}", flush=True)
        return "limit"
    print(f"FAIL   {name}: {type(exc).__name__}: {exc}", flush=True)
    if verbose:
        traceback.print_exc()
    return "fail"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=[], help="keep only the cases whose name holds one of these")
    ap.add_argument("--skip", action="append", default=[], help="leave out the cases whose name holds this")
    ap.add_argument("--from", dest="start", help="skip the cases before this one")
    ap.add_argument("--real-only", action="store_true")
    ap.add_argument("--fixtures-only", action="store_true")
    ap.add_argument("--tiny-only", action="store_true", help="only the tiny real-weight checkpoints")
    ap.add_argument(
        "--pairs-only",
        action="store_true",
        help="only the separate drafts, each twinned beside its target's twin (`pair:` cases)",
    )
    ap.add_argument("--external", action="store_true", help="only the external layouts (fixtures/external_layouts.py)")
    ap.add_argument("-v", action="store_true")
    ap.add_argument(
        "--probe",
        action="store_true",
        help="also lint each twin (vLLM's own construction on meta tensors) and count its load errors",
    )
    a = ap.parse_args()
    from fixtures.build import cached_build, list_recipes

    cases: list[tuple[str, object]] = []
    if a.external:
        from fixtures import external_layouts

        cases += [
            (f"external:{n}", lambda d, c=c: external_layouts.write(c, d / "src"))
            for n, c in external_layouts.CASES.items()
        ]
    only = a.real_only or a.tiny_only or a.pairs_only or a.external
    if not only:
        cases += [(r, lambda d, r=r: cached_build(r)) for r in list_recipes()]
    if not (a.real_only or a.tiny_only or a.external):
        cases += pair_cases()
    if not (a.real_only or a.fixtures_only or a.pairs_only or a.external):
        cases += tiny_cases()
    if not (a.fixtures_only or a.tiny_only or a.pairs_only or a.external):
        cases += [(f"real:{s}", lambda d, s=s: real_layout(s, d / "src")) for s in [*REAL_LAYOUTS, *QUANTIZED_LAYOUTS]]
    if a.start:
        cases = cases[[n for n, _ in cases].index(a.start) :]
    counts = {"ok": 0, "limit": 0, "fail": 0}
    for name, make in cases:
        if (a.only and not any(o in name for o in a.only)) or any(s in name for s in a.skip):
            continue
        counts[(one_pair if name.startswith("pair:") else one)(name, make, a)] += 1
    ok, limit, fail = counts["ok"], counts["limit"], counts["fail"]
    print(f"twin: {ok} built, {limit} engine/twin limits named, {fail} failed, of {ok + limit + fail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
