"""Build vLLM's configs, target model and MTP draft on meta, recording every quant decision.

Runs only in the probe child, after runtime_shim.install(). The configs come from vLLM's own
EngineArgs.create_engine_config() (engine_config.py; SpeculativeConfig chooses the draft
architecture and its config overrides), the models from initialize_model(), exactly as
`vllm serve --speculative-config '{"method":"mtp",...}'` does.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import phases
from ..report import ChildRequest, Decision, ErrorRecord, Model
from . import speculators


@dataclass
class QuantDecision:
    model: Model
    prefix: str  # the prefix vLLM passed to quant_config.get_quant_method(layer, prefix)
    layer_class: str
    method: str | None  # class name of the returned quant method (None: quant_config returned None)
    scheme: str | None = None  # compressed-tensors scheme class, when chosen
    module: str | None = None  # the module's path in named_modules(), filled after construction
    compared: list[str] = field(default_factory=list)  # names the format's matcher was called with
    layer: Any = field(default=None, repr=False, compare=False)  # not serialized

    def to_report(self) -> Decision:
        return Decision(
            model=self.model,
            prefix=self.prefix,
            layer_class=self.layer_class,
            method=self.method,
            scheme=self.scheme,
            module=self.module,
            compared=list(self.compared),
        )


@dataclass
class Built:
    vllm_config: Any
    spec_config: Any
    target: Any = None
    draft: Any = None
    decisions: list[QuantDecision] = field(default_factory=list)
    errors: dict[str, ErrorRecord] = field(default_factory=dict)  # model -> why it failed to build
    # Every (model, prefix) a module was constructed with, including layers built without
    # asking the quant config (routers, nn.Linear-like ReplicatedLinear(quant_config=None)).
    prefixes: list[tuple[Model, str]] = field(default_factory=list)
    # The quant configs vLLM made from a separate draft's own checkpoint while building it.
    draft_quant_configs: list[Any] = field(default_factory=list)
    # With pipeline parallelism, the target as each earlier rank builds it (pipeline_stages);
    # `target` is the last rank's, the one the draft runs beside.
    stages: list[Any] = field(default_factory=list)
    # What the target's HF configs held before the draft was constructed (load_order.py).
    target_config_state: Any = None

    def target_stages(self) -> list[Any]:
        """Every rank's target, in rank order (the last rank's last)."""
        return [m for m in (*self.stages, self.target) if m is not None]


def _record_quant_decisions(quant_config: Any, sink: list[QuantDecision], phase: list[Model]) -> None:
    from .matchers import ComparedNames

    original = quant_config.get_quant_method
    quant_config._mtplint_original_get_quant_method = original
    # Installed for the child's lifetime: the matchers only record inside a decision.
    compared = ComparedNames()
    compared.install(quant_config)

    def recording_get_quant_method(layer: Any, prefix: str) -> Any:
        with compared.during() as names:
            method = original(layer, prefix)
        scheme = getattr(layer, "scheme", None)
        sink.append(
            QuantDecision(
                model=phase[0],
                prefix=prefix,
                layer_class=type(layer).__name__,
                method=type(method).__name__ if method is not None else None,
                scheme=type(scheme).__name__ if scheme is not None else None,
                compared=names,
                layer=layer,
            )
        )
        return method

    quant_config.get_quant_method = recording_get_quant_method


def make_configs(request: ChildRequest) -> tuple[Any, Any]:
    """(VllmConfig, SpeculativeConfig) as `vllm serve` creates them: the probed release's own
    EngineArgs.create_engine_config() (engine_config)."""
    from .engine_config import create

    return create(request)


def init_parallel(tensor_parallel_size: int, pipeline_parallel_size: int = 1, parallel_config: Any = None) -> None:
    """A single-process gloo group, then made to report world size N at rank 0, so
    per-rank shapes and divisibility checks in vLLM's layers are the real ones for TP=N.
    With PP=P it reports the last pipeline rank: the one that runs the MTP draft (the target's
    earlier ranks are built at their own rank: pipeline_stages). The data, decode- and
    prefill-context parallel groups report the sizes the command asks for, at rank 0."""
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.distributed.parallel_state import (
        get_tp_group,
        model_parallel_is_initialized,
    )

    if not model_parallel_is_initialized():
        port = 20000 + os.getpid() % 20000
        # vLLM joins the rendezvous of the deployment (--master-addr/--master-port of a
        # multi-node command, the DP master address) when its config asks for several nodes
        # or DP ranks: this process is the only rank, on loopback, and waits for no peer.
        with _one_process(parallel_config):
            init_distributed_environment(
                world_size=1, rank=0, local_rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo"
            )
            initialize_model_parallel(1, 1)
    if tensor_parallel_size > 1:
        group = get_tp_group()
        group.world_size = tensor_parallel_size
        group.rank_in_group = 0
        group.ranks = list(range(tensor_parallel_size))
    if pipeline_parallel_size > 1:
        from .pipeline_stages import set_rank

        set_rank(pipeline_parallel_size - 1, pipeline_parallel_size)
    if parallel_config is not None:
        _report_group_sizes(parallel_config)


# ParallelConfig fields that make vLLM's group set-up span processes, as one process has them.
_ONE_PROCESS = {
    "nnodes": 1,
    "node_rank": 0,
    "data_parallel_size": 1,
    "data_parallel_rank": 0,
    "prefill_context_parallel_size": 1,
    "decode_context_parallel_size": 1,
    "enable_elastic_ep": False,
}


@contextlib.contextmanager
def _one_process(parallel_config: Any) -> Iterator[None]:
    if parallel_config is None:
        yield
        return
    saved = {k: getattr(parallel_config, k) for k in _ONE_PROCESS if hasattr(parallel_config, k)}
    try:
        for k in saved:
            object.__setattr__(parallel_config, k, _ONE_PROCESS[k])
        yield
    finally:
        for k, v in saved.items():
            object.__setattr__(parallel_config, k, v)


def _report_group_sizes(parallel_config: Any) -> None:
    """The DP, DCP and PCP groups as rank 0 of the deployment sees them (vLLM's MoE layers
    shard their experts over DP x PCP x TP, its attention splits the KV cache over DCP)."""
    from vllm.distributed import parallel_state

    for getter, field_name in (
        ("get_dp_group", "data_parallel_size"),
        ("get_dcp_group", "decode_context_parallel_size"),
        ("get_pcp_group", "prefill_context_parallel_size"),
    ):
        size = getattr(parallel_config, field_name, 1) or 1
        get = getattr(parallel_state, getter, None)
        if size <= 1 or get is None:
            continue
        with contextlib.suppress(AssertionError):
            group = get()
            group.world_size = size
            group.rank_in_group = 0
            group.ranks = list(range(size))


def init_workspace() -> None:
    """The worker's workspace manager, as the GPU worker sets it up before it builds the model
    (vLLM 0.33.0 gpu_worker `_init_workspace_and_model_runner`): layers that reserve scratch
    at construction (DeepSeek-V3.2's sparse MLA with an fp8_ds_mla KV cache) need it. On meta,
    where the probed release has one."""
    import torch

    try:
        from vllm.v1.worker.workspace import init_workspace_manager, is_workspace_manager_initialized
    except ImportError:
        return
    if not is_workspace_manager_initialized():
        init_workspace_manager(torch.device("meta"))


def _error_record(exc: BaseException) -> ErrorRecord:
    from .frames import error_record

    return error_record(exc)


def build(request: ChildRequest) -> Built:
    import torch  # noqa: F401
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model

    from .load_order import TargetConfigState
    from .pipeline_stages import at_rank
    from .runtime_shim import install_index_data, meta_device_mode
    from .vllm_compat import set_default_torch_dtype

    install_index_data()
    phases.emit("creating the engine configuration (EngineArgs.create_engine_config)")
    vllm_config, spec_config = make_configs(request)
    built = Built(vllm_config=vllm_config, spec_config=spec_config)
    phase: list[Model] = ["target"]
    if vllm_config.quant_config is not None:
        _record_quant_decisions(vllm_config.quant_config, built.decisions, phase)

    speculators.check(spec_config, find_proposer_class(), _FakeProposer)
    with set_current_vllm_config(vllm_config):
        init_parallel(request.tensor_parallel_size, request.pipeline_parallel_size, vllm_config.parallel_config)
        init_workspace()
        pp = request.pipeline_parallel_size
        for rank in range(pp):
            with set_default_torch_dtype(vllm_config.model_config.dtype), meta_device_mode(), at_rank(rank, pp):
                stage = f" (pipeline stage {rank + 1} of {pp})" if pp > 1 else ""
                phases.emit(f"constructing the target on meta ({vllm_config.model_config.architectures[0]}){stage}")
                try:
                    model = initialize_model(vllm_config=vllm_config)
                except MemoryError:
                    raise  # the machine ran out: a probe failure, not a finding (MTP009)
                except Exception as exc:  # construction failures are findings (MTP009)
                    built.errors.setdefault("target", _error_record(exc))
                    continue
            if rank < pp - 1:
                built.stages.append(model)
            else:
                built.target = model
    phase[0] = "draft"
    built.target_config_state = TargetConfigState(vllm_config)

    def own_quant() -> Any:
        return _draft_quant_configs(built, phase) if request.speculative else contextlib.nullcontext()

    with own_quant():  # a proposer's own config may make the draft's quant config (draft_model)
        draft_vllm_config = draft_config_for(vllm_config, spec_config)
        draft_vllm_config = speculators.draft_vllm_config(vllm_config, spec_config, draft_vllm_config)
    with set_current_vllm_config(draft_vllm_config), own_quant():
        draft_model_config = spec_config.draft_model_config
        with set_default_torch_dtype(draft_model_config.dtype), meta_device_mode():
            what = (
                "draft"
                if request.draft_config_dir
                else ("MTP draft" if spec_config.method == "mtp" else f"{spec_config.method} drafter")
            )
            phases.emit(f"constructing the {what} on meta ({draft_model_config.architectures[0]})")
            try:
                built.draft = initialize_model(
                    vllm_config=draft_vllm_config,
                    model_config=draft_model_config,
                    prefix=speculators.model_prefix(spec_config.method),
                )
            except MemoryError:
                raise
            except Exception as exc:
                built.errors["draft"] = _error_record(exc)
    if request.speculative:
        _drop_replaced(built)
    _attach_module_paths(built)
    return built


def _drop_replaced(built: Built) -> None:
    """Decisions for draft layers construction replaced: EAGLE3's decoder layer builds its
    parent's `qkv_proj` and then a wider one in its place (vLLM 0.33.0 llama_eagle3.py), and
    only the one in the model is loaded and run. (Kept for MTP drafts, whose recorded reports
    predate this.)"""
    if built.draft is None:
        return
    live = {id(m) for _, m in built.draft.named_modules()}
    built.decisions = [d for d in built.decisions if d.model != "draft" or d.layer is None or id(d.layer) in live]


@contextlib.contextmanager
def _draft_quant_configs(built: Built, phase: list[Model]) -> Iterator[None]:
    """Record the decisions of the quant configs a separate draft is built with: its layers
    ask `get_draft_quant_config()`, which makes a new config from the draft checkpoint on
    every call (vLLM 0.33.0 models/utils.py), not the target's `vllm_config.quant_config`."""
    from vllm.config import VllmConfig

    original = VllmConfig.__dict__.get("get_quantization_config")
    if not isinstance(original, staticmethod):
        yield  # a release without it builds the draft with the target's config: recorded already
        return
    make = original.__func__

    def recording(model_config: Any, load_config: Any) -> Any:
        quant_config = make(model_config, load_config)
        if model_config is built.vllm_config.model_config:
            return quant_config  # the target's, remade by a VllmConfig copy's post-init
        if quant_config is not None and not hasattr(quant_config, "_mtplint_original_get_quant_method"):
            _record_quant_decisions(quant_config, built.decisions, phase)
            built.draft_quant_configs.append(quant_config)
        return quant_config

    VllmConfig.get_quantization_config = staticmethod(recording)  # type: ignore[method-assign]
    try:
        yield
    finally:
        VllmConfig.get_quantization_config = original  # type: ignore[method-assign]


def draft_config_for(vllm_config: Any, spec_config: Any) -> Any:
    """The VllmConfig the speculative proposer builds its draft with (vLLM's own code
    where the probed version has it)."""
    own = speculators.proposer_class(getattr(spec_config, "method", None), spec_config)
    proposer_cls = own or find_proposer_class()
    if proposer_cls is not None and hasattr(proposer_cls, "_create_draft_vllm_config"):
        attrs = {"vllm_config": vllm_config, "speculative_config": spec_config}
        fake = speculators.stand_in(own, _FakeProposer, **attrs) if own else _FakeProposer(**attrs)
        with contextlib.suppress(Exception):
            return proposer_cls._create_draft_vllm_config(fake)
    return vllm_config


class _FakeProposer:
    """Just the attributes the proposer's config and wiring helpers read."""

    def __init__(self, **attrs: Any):
        self.__dict__.update(attrs)

    def __getattr__(self, item: str) -> Any:
        # Flags the helpers consult for unrelated features (local argmax, parallel
        # drafting...) read as "off".
        if item.startswith("__"):
            raise AttributeError(item)
        return None


def find_proposer_class() -> Any:
    import importlib

    for mod_name, cls_name in (
        ("vllm.v1.spec_decode.llm_base_proposer", "SpecDecodeBaseProposer"),
        ("vllm.v1.spec_decode.eagle", "EagleProposer"),
    ):
        try:
            mod = importlib.import_module(mod_name)
        except Exception:
            continue
        cls = getattr(mod, cls_name, None)
        if cls is None:
            for value in vars(mod).values():
                if isinstance(value, type) and hasattr(value, "_maybe_share_lm_head"):
                    cls = value
                    break
        if cls is not None:
            return cls
    return None


def _attach_module_paths(built: Built) -> None:
    """Pair each recorded construction prefix with the module's path in named_modules()
    (they differ for MTP blocks: `model.layers.43.ffn.experts` is built inside
    `model.layers.43.mtp_block`)."""
    models: list[tuple[Model, Any]] = [("target", m) for m in built.target_stages()] + [("draft", built.draft)]
    for model_name, model in models:
        if model is None:
            continue
        by_prefix: dict[str, str] = {}
        for path, module in model.named_modules():
            prefix = getattr(module, "prefix", None) or getattr(module, "layer_name", None)
            if isinstance(prefix, str) and prefix:
                by_prefix.setdefault(prefix, path)
        for d in built.decisions:
            if d.model == model_name and d.module is None:
                d.module = by_prefix.get(d.prefix)
        built.prefixes += [(model_name, p) for p in by_prefix]
        # Layers whose method was settled without a recorded get_quant_method call (a
        # patch, or a quant_config of None) still carry what they were built with.
        recorded = {d.prefix for d in built.decisions if d.model == model_name}
        for prefix, path in by_prefix.items():
            method = getattr(model.get_submodule(path), "quant_method", None)
            if prefix not in recorded and method is not None:
                built.decisions.append(
                    QuantDecision(
                        model=model_name,
                        prefix=prefix,
                        layer_class=type(model.get_submodule(path)).__name__,
                        method=type(method).__name__,
                        module=path,
                    )
                )
