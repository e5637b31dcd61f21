"""Probe child: `python -m mtplint.probe.child REQUEST.json REPORT.json`.

Runs in its own process (vLLM patches a lot at import and can crash or hang); the parent
enforces the timeout and turns a crash into a clear error. Writes a versioned JSON report.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import time
from typing import Any

from ..report import ChildRequest, Model, ModelInfo, ParamInfo, PatchRecord, ProbeReport, Quant, VllmIdentity


def _params(model: Any) -> dict[str, ParamInfo]:
    if model is None:
        return {}
    out = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        out[name] = ParamInfo(shape=list(p.shape), dtype=str(p.dtype).removeprefix("torch."), module_class=None)
    for path, module in model.named_modules():
        for pname, _ in module.named_parameters(recurse=False):
            full = f"{path}.{pname}" if path else pname
            if full in out:
                out[full].module_class = type(module).__name__
    return out


def _model_class(model: Any) -> str | None:
    return None if model is None else f"{type(model).__module__}.{type(model).__qualname__}"


def prepare(platform: dict[str, Any]) -> float:
    """Everything a probe does before its first request-specific step (the shims, importing
    vLLM and the probe's modules); seconds taken. A cold probe runs it first thing, a probe
    worker once before it forks a child per request: both then run the same code on the
    same state."""
    t0 = time.perf_counter()
    from . import runtime_shim

    runtime_shim.install(
        tuple(platform["sm"]), platform["gpu_name"], platform["gpu_memory"], platform["gpus"], platform.get("arch", "")
    )
    import vllm  # noqa: F401

    from . import (
        wiring,  # noqa: F401
    )
    from .patches_bridge import apply_patches  # noqa: F401

    # What construction imports first (older releases may lack one: construction then
    # fails on it as it always did).
    for name in _CONSTRUCTION_IMPORTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    return time.perf_counter() - t0


_CONSTRUCTION_IMPORTS = (
    "vllm.config",
    "vllm.engine.arg_utils",
    "vllm.distributed",
    "vllm.distributed.parallel_state",
    "vllm.model_executor.model_loader.utils",
    "vllm.utils.torch_utils",
)


def _prepare_cold(request: ChildRequest) -> float:
    from .. import phases

    phases.emit("importing vLLM")
    return prepare(request.platform())


def probe(request: ChildRequest, *, prepared: bool = False) -> ProbeReport:
    """prepared: a worker ran prepare() before forking this process (its import time is not
    this probe's)."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    timings["import"] = 0.0 if prepared else _prepare_cold(request)
    from ...core.gc_pause import gc_paused

    with gc_paused():  # cold or forked alike: from here on the same code on the same state
        report = _probe(request, timings, t0)
    report.absent_gpu_packages = _absent_gpu_packages_named(report)
    from . import unchecked_steps

    report.unchecked_steps = unchecked_steps.drain()
    return report


def _probe(request: ChildRequest, timings: dict[str, float], t0: float) -> ProbeReport:
    """Every report section, in the order vLLM's start-up reaches it: construction, the models
    built, the dry-run loads, the proposer's wiring, the exclusion entries, the kernels."""
    import vllm

    from .. import phases
    from . import config_rewrites, construct, engine_config, kernels, matchers, runtime_shim, switches
    from .patches_bridge import apply_patches

    report = ProbeReport(
        vllm=VllmIdentity(version=getattr(vllm, "__version__", None), commit=_commit()),
        request=request.modelled(),
        stubbed_modules=list(runtime_shim.NATIVE_MODULES + runtime_shim.LATE_STUBS),
        timings=timings,
    )
    report.patches = [PatchRecord.from_apply(r["id"], r) for r in apply_patches(request.patches)]

    t = time.perf_counter()
    try:
        # Exclusion lists some configs read only inside a method of their own (which
        # prefixes they are asked about, and the names they compare): see matchers.
        with matchers.record_consultations() as consultations:
            built = construct.build(request)
    except MemoryError:
        raise  # the machine ran out: a probe failure (exit 3), not a finding about the checkpoint
    except engine_config.ServeArgsRejected as exc:
        report.serve_args_rejected = str(exc)  # bad input (exit 2), in vLLM's own words
        return report
    except Exception as exc:  # config-level failure (SpeculativeConfig, ModelConfig)
        from .frames import error_record

        report.config_error = error_record(exc)
        report.request = request.modelled()  # the method vLLM resolved before it refused
        return report
    timings["construct"] = time.perf_counter() - t
    report.request = request.modelled()  # what vLLM read: TP, PP, N, the method it resolved
    separate = bool(request.draft_config_dir)  # a draft from its own checkpoint (--draft)
    _record_construction(report, built, separate)
    report.served_with = switches.read(built.vllm_config)
    report.config_rewrites = config_rewrites.read(
        request.config_dir, request.trust_remote_code, built.vllm_config.model_config.hf_config
    )
    _dry_run_loads(report, built, request, separate)
    _record_wiring(report, built, timings)
    _record_exclusions(report, built, consultations, separate, timings)
    phases.emit("asking vLLM's kernel predicates")
    report.kernels = kernels.evaluate(built.vllm_config, request.num_speculative_tokens)
    timings["total"] = time.perf_counter() - t0
    import resource

    report.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return report


def _record_construction(report: ProbeReport, built: Any, separate: bool) -> None:
    """What vLLM built: the models, the draft's config, the quantization, every quant-method
    decision and every parameter."""
    hf = built.spec_config.draft_model_config.hf_config
    report.models = {
        "target": ModelInfo(
            model_class=_model_class(built.target),
            architecture=built.vllm_config.model_config.architectures[0],
        ),
        "draft": ModelInfo(
            model_class=_model_class(built.draft),
            architecture=built.spec_config.draft_model_config.architectures[0],
            n_predict=built.spec_config.num_speculative_tokens and getattr(hf, "n_predict", None),
        ),
    }
    # Without `_name_or_path`: the temporary config directory, different in every probe.
    report.draft_hf_config = {
        k: v
        for k, v in hf.to_dict().items()
        if isinstance(v, (int, float, str, bool, type(None), list)) and k != "_name_or_path"
    }
    # A separate draft only: an MTP block belongs to its target's config, and recorded MTP reports stay as they were.
    report.draft_attention_windows = _attention_windows(built.draft) if separate else {}
    report.quant = Quant(
        method=built.vllm_config.model_config.quantization,
        config_class=type(built.vllm_config.quant_config).__name__
        if built.vllm_config.quant_config is not None
        else None,
        draft_method=getattr(built.spec_config, "quantization", None)
        or (built.spec_config.draft_model_config.quantization if separate else None),
    )
    report.construction_errors = built.errors
    report.decisions = [d.to_report() for d in built.decisions]
    # The target's parameters over every pipeline stage (each rank holds its own layers').
    target_params: dict[str, ParamInfo] = {}
    for stage in built.target_stages() if built.target is not None else []:
        target_params.update(_params(stage))
    report.params = {"target": target_params, "draft": _params(built.draft)}


def _attention_windows(model: Any) -> dict[str, int | None]:
    """Each attention layer's sliding window as vLLM's Attention resolved it (the per-layer
    window the model passed, else the cache config's, which comes from the target)."""
    if model is None:
        return {}
    out: dict[str, int | None] = {}
    for name, module in model.named_modules():
        # vLLM's Attention layer (the KV-cache owner, every release) holds layer_name and the
        # resolved sliding_window.
        window = getattr(module, "sliding_window", "absent")
        if window == "absent" or not isinstance(getattr(module, "layer_name", None), str):
            continue
        out[name] = window if isinstance(window, int) and not isinstance(window, bool) else None
    # Some draft classes keep the window and layer name on their own attention wrapper too
    # (DFlashQwen3Attention): the innermost module is the Attention layer that owns the KV cache.
    return {name: w for name, w in out.items() if not any(other.startswith(name + ".") for other in out)}


def _record_wiring(report: ProbeReport, built: Any, timings: dict[str, float]) -> None:
    """The proposer's post-load sharing of the target's embedding and head, replayed."""
    if built.target is None or built.draft is None:
        return
    from vllm.config import set_current_vllm_config

    from .. import phases
    from . import wiring

    t = time.perf_counter()
    phases.emit("replaying the proposer's embedding and head sharing")
    with set_current_vllm_config(built.vllm_config):
        report.wiring = wiring.replay(built.draft, built.target, built.vllm_config, built.spec_config)
    timings["wiring"] = time.perf_counter() - t


def _record_exclusions(
    report: ProbeReport, built: Any, consultations: Any, separate: bool, timings: dict[str, float]
) -> None:
    """Each exclusion entry of the checkpoint linted (a separate draft's own, over its layers)
    matched against every construction prefix with the format's own vLLM matcher."""
    from .. import phases
    from . import matchers

    qc = (built.draft_quant_configs or [None])[0] if separate else built.vllm_config.quant_config
    if qc is None:
        return
    lint_hf = built.spec_config.draft_model_config.hf_config if separate else built.vllm_config.model_config.hf_config
    t = time.perf_counter()
    phases.emit("matching exclusion entries with vLLM's own matchers")
    decisions = [d for d in built.decisions if not separate or d.model == "draft"]
    layers = [(d.model, d.prefix, d.layer) for d in decisions if d.layer is not None]
    seen = {(m, p) for m, p, _ in layers}
    layers += [(m, p, None) for m, p in built.prefixes if (m, p) not in seen and (not separate or m == "draft")]
    original = getattr(qc, "_mtplint_original_get_quant_method", qc.get_quant_method)
    models_of: dict[str, set[Model]] = {}
    for d in built.decisions:
        models_of.setdefault(d.prefix, set()).add(d.model)

    def model_of(prefix: str, cfg: Any) -> Model:
        models = models_of.get(prefix, set())
        if len(models) == 1:
            return next(iter(models))
        return "target" if cfg is built.vllm_config else "draft"

    compared = {(d.model, d.prefix): d.compared for d in built.decisions if d.compared}
    report.exclusions = matchers.match_entries(
        qc, original, layers, consultations, model_of, compared, _plain_linears(built, separate)
    )
    first = report.exclusions[0]
    declared = getattr(lint_hf, "quantization_config", None)
    first.as_written = matchers.as_written(first, declared)
    first.filled_by = matchers.filled_by(qc, first, declared)
    timings["exclusions"] = time.perf_counter() - t


def _dry_run_loads(report: ProbeReport, built: Any, request: ChildRequest, separate: bool) -> None:
    """Each built model's own load_weights() over its checkpoint's tensors: a separate draft's
    from its own checkpoint."""
    from vllm.config import set_current_vllm_config

    from .. import phases
    from . import dryrun

    tensors = {"target": _tensors(request.tensors_file)}
    tensors["draft"] = _tensors(request.draft_tensors_file or "") if separate else tensors["target"]
    from .pipeline_stages import at_rank, merge_runs

    # Each pipeline stage of the target loads its own slice (one stage without PP).
    stages = built.target_stages() if built.target is not None else []
    pp = request.pipeline_parallel_size
    for name, models in (("target", stages), ("draft", [built.draft] if built.draft is not None else [])):
        if not models:
            continue
        t = time.perf_counter()
        label = "the target" if name == "target" else ("the draft" if separate else "the MTP draft")
        phases.emit(f"dry-run load of {label} ({len(tensors[name]):,} checkpoint tensors on meta)")
        model_config = built.vllm_config.model_config if name == "target" else built.spec_config.draft_model_config
        runs = []
        for rank, model in enumerate(models):
            # vLLM loads the target before it builds the draft (load_order.py).
            state = built.target_config_state
            as_target_saw = state.as_before_draft() if name == "target" and state else contextlib.nullcontext()
            stage = at_rank(rank if name == "target" else pp - 1, pp)
            with set_current_vllm_config(built.vllm_config), stage, as_target_saw:
                runs.append(
                    dryrun.run(
                        model,
                        tensors[name],
                        mtp_completeness=(name == "draft"),
                        elide=report.request.elide,
                        tp=report.request.tensor_parallel_size,
                        quantized=model_config.quantization is not None,
                    )
                )
        report.timings[f"load_{name}"] = time.perf_counter() - t
        report.load[name] = merge_runs(runs).to_report()
    if separate and "target" in report.load:
        report.load["target"] = _parameters_only(report.load["target"])


def _tensors(path: str) -> list[tuple[Any, ...]]:
    with open(path) as f:
        return [tuple(t) for t in json.load(f)]


def _parameters_only(load: Any) -> Any:
    """A separate draft's lint keeps of the target's load only which parameters were filled
    (the draft shares some of them): its tensors and errors belong to another checkpoint,
    linted on its own, and would be read as the draft's."""
    from ..report import LoadResult

    # Both kinds of "filled" as loaded parameters: the weight flow credits shared target
    # parameters from `loaded_params` once the tensors are gone (not every load_weights() returns them).
    filled = sorted(set(load.loaded_params) | set(load.params_loaded_by_loader))
    return LoadResult(loaded_params=filled, params_loaded_by_loader=load.params_loaded_by_loader)


# GPU-only packages vLLM pins whose kernel checks can stop construction on some GPUs, with
# the name vLLM's messages give them (DeepGEMM is not one: vLLM vendors it, and its
# assertions are real start-up failures).
_GPU_PACKAGES = {"flashinfer": "FlashInfer"}


def _absent_gpu_packages_named(report: ProbeReport) -> list[str]:
    """The GPU-only packages this interpreter lacks that an error of the report names: only
    where it matters, so every other report stays as it was."""
    import importlib.util

    from .unchecked_steps import absent_package

    errors = [*report.construction_errors.values(), *([report.config_error] if report.config_error else [])]
    named = [
        package
        for package, shown in _GPU_PACKAGES.items()
        if any(shown in e.message for e in errors) and importlib.util.find_spec(package) is None
    ]
    # Any package an import error names that this interpreter lacks (`No module named 'x'`). Not
    # where vLLM chose among backends itself and lists why each was refused: a backend refused
    # for its missing package may refuse the deployment too (fp8_ds_mla KV cache on an MHA draft),
    # so the absence alone does not make the error the environment's.
    for e in errors:
        if "No valid attention backend found" in e.message:
            continue
        package = absent_package(e.message)
        if package is not None and package not in named:
            named.append(package)
    return named


def _plain_linears(built: Any, draft_only: bool) -> list[tuple[Model, str]]:
    """(model, module path) of every torch nn.Linear: built without asking the quant config
    (DeepSeek/GLM MTP `eh_proj`), so no exclusion entry decides it today."""
    import torch

    out: list[tuple[Model, str]] = []
    models: list[tuple[Model, Any]] = [("target", m) for m in built.target_stages()] + [("draft", built.draft)]
    for name, model in models:
        if model is not None and not (draft_only and name == "target"):
            out += [(name, path) for path, m in model.named_modules() if type(m) is torch.nn.Linear]
    return out


def _commit() -> str | None:
    try:
        from vllm import _version

        return getattr(_version, "__commit_id__", None)
    except Exception:
        return None


def main(argv: list[str]) -> int:
    from ..lifecycle import die_with_parent

    die_with_parent()  # before vLLM is imported: an orphaned probe must not run on
    return answer(argv[1], argv[2], prepared=False)


def answer(request_path: str, report_path: str, *, prepared: bool) -> int:
    """Probe what REQUEST.json asks and write REPORT.json (atomically)."""
    with open(request_path) as f:
        request = ChildRequest.from_json(json.load(f))
    report = probe(request, prepared=prepared)
    from ...core.gc_pause import gc_paused

    tmp = report_path + ".tmp"
    with gc_paused(), open(tmp, "w") as f:
        json.dump(report.to_json(), f)
    import os

    os.replace(tmp, report_path)
    return 0
