"""Dry-run a model's own load_weights() with meta tensors made from safetensors headers.

vLLM's real name remapping, stacking and weight loaders run (shape asserts included);
no byte of weight data is read. Every checkpoint tensor is attributed to the parameters
its loading fed, and loading resumes after an error so one run reports every problem.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..report import Elision, ErrorRecord, LoadError, LoadResult
from .frames import error_record

ELISION_RULE = (
    "per-expert tensors identical in name pattern, dtype and shape over a contiguous expert range: "
    "first and last expert fed, the rest attributed like the first"
)

TORCH_DTYPES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "I16": "int16",
    "U16": "uint16",
    "I32": "int32",
    "U32": "uint32",
    "I64": "int64",
    "U64": "uint64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
}


_EXPERT = re.compile(r"^(.*\.experts\.)(\d+)(\..+)$")


def plan_elision(
    model: Any, tensors: list[tuple[str, str, list[int]]], owner: dict[int, int] | None = None
) -> tuple[list[int], dict[str, str]]:
    """Which tensors to feed, and which to elide as identical in kind to a fed one.

    Per-expert tensors of one layer that differ only in the expert index, with the same
    dtype and shape over a contiguous index range, go through the same loader path into
    the same fused parameter: only the first and last expert are fed (the range edges are
    where expert-id mapping could differ). Models whose parameters are per-expert
    (`...experts.3.w1.weight`) are never elided. With expert parallelism (`owner`: expert id ->
    the EP rank that loads it) each rank's experts are a range of their own.
    """
    if any(_EXPERT.match(n) for n, _ in model.named_parameters()):
        return list(range(len(tensors))), {}
    groups: dict[tuple[str, str, int], list[tuple[int, int, str, tuple]]] = {}
    for i, (name, dtype, shape) in enumerate(tensors):
        m = _EXPERT.match(name)
        if m:
            rank = (owner or {}).get(int(m.group(2)), 0)
            groups.setdefault((m.group(1), m.group(3), rank), []).append((int(m.group(2)), i, dtype, tuple(shape)))
    elided: dict[str, str] = {}
    drop: set[int] = set()
    for members in groups.values():
        if len(members) < 3 or len({(d, s) for _, _, d, s in members}) != 1:
            continue
        ids = sorted(e for e, *_ in members)
        if ids != list(range(ids[0], ids[0] + len(ids))):
            continue
        members.sort()
        rep = tensors[members[0][1]][0]
        for _e, i, _d, _s in members[1:-1]:
            drop.add(i)
            elided[tensors[i][0]] = rep
    return [i for i in range(len(tensors)) if i not in drop], elided


@dataclass
class DryRun:
    fed: dict[str, list[str]] = field(default_factory=dict)  # checkpoint tensor -> params it fed
    errors: list[LoadError] = field(default_factory=list)
    loaded_params: set[str] = field(default_factory=set)  # what load_weights returned
    params_loaded_by_loader: set[str] = field(default_factory=set)  # whose weight_loader took a tensor
    completeness_error: ErrorRecord | None = None
    returned_loaded: bool = False  # load_weights() returned the parameters it loaded (not None)
    elided: dict[str, str] = field(default_factory=dict)  # elided tensor -> representative fed
    # Checkpoint tensor -> the name a vLLM WeightsMapper dropped it under (mapped to None).
    discarded: dict[str, str] = field(default_factory=dict)
    held_back: dict[str, str] = field(default_factory=dict)  # tensor -> the tensor whose loading read it
    truncated: dict[str, list[int]] = field(default_factory=dict)  # tensor -> [elements copied, elements]
    seconds: float = 0.0

    def to_report(self) -> LoadResult:
        return LoadResult(
            fed=self.fed,
            errors=self.errors,
            loaded_params=sorted(self.loaded_params),
            params_loaded_by_loader=sorted(self.params_loaded_by_loader),
            completeness_error=self.completeness_error,
            elided=Elision(tensors=len(self.elided), groups=len(set(self.elided.values())), rule=ELISION_RULE),
            discarded=self.discarded,
            held_back=self.held_back,
            truncated=self.truncated,
        )


def meta_tensor(dtype: str, shape: list[int]) -> Any:
    import torch

    return torch.empty(shape, dtype=getattr(torch, TORCH_DTYPES[dtype]), device="meta")


# The name of vLLM's layerwise (online quantization) weight-loader wrapper.
_ONLINE_LOADER = "online_process_loader"
# Depth of layerwise replays in progress: their copies repeat loads already counted.
_replaying = [0]


@contextlib.contextmanager
def _online_processing_on_meta() -> Iterator[list[str]]:
    """Online quantization (`--quantization fp8` on a BF16 checkpoint, vLLM's layerwise
    processing) buffers each layer's loads, then materializes the layer on the GPU, replays the
    loads into it and quantizes it (process_weights_after_loading). Here the GPU is meta: the
    layer is materialized on meta and the loads are replayed (shapes and loaders as on the GPU
    box); the quantization itself computes from weight values (amax, scales) and is not run.
    Yields the modules whose quantization was left out."""
    try:
        from vllm.model_executor.model_loader.reload import layerwise
    except ImportError:
        yield []
        return
    from .runtime_shim import meta_device_mode

    original = layerwise._layerwise_process
    left_out: list[str] = []

    def on_meta(layer: Any, info: Any) -> None:
        method: Any = getattr(layer, "quant_method", None)
        online = bool(getattr(method, "uses_meta_device", False))
        if online:
            method.process_weights_after_loading = lambda _layer: left_out.append(getattr(layer, "prefix", ""))
        _replaying[0] += 1
        try:
            with meta_device_mode():
                original(layer, info)
        finally:
            _replaying[0] -= 1
            if online:
                with contextlib.suppress(AttributeError):
                    del method.process_weights_after_loading

    layerwise._layerwise_process = on_meta
    try:
        yield left_out
    finally:
        layerwise._layerwise_process = original


class _Attribution:
    """Wraps every parameter's weight_loader so a call is attributed to the current key."""

    def __init__(self, model: Any):
        from vllm.model_executor.model_loader.weight_utils import default_weight_loader

        self._current: str | None = None
        self.current_fed = False  # the current tensor's loading has fed a parameter
        self.failed_param: str | None = None
        self.fed: dict[str, list[str]] = {}
        self.held_back: dict[str, str] = {}  # tensor -> the tensor whose loading consumed it
        self.params_loaded_by_loader: set[str] = set()
        self._restore: list[tuple[Any, Any, bool]] = []
        self._held: dict[str, Any] = {}  # tensor name -> weakref to the meta tensor handed out
        # Module -> the tensors of it handed out and still alive: what a loader may be holding.
        self._alive: dict[str, set[str]] = {}
        # Tensor -> the tensor whose loading fed its module while it was held: read with that
        # loading if the loader lets go of it before the dry run ends.
        self._held_for: dict[str, str] = {}
        # id() of each meta tensor handed out and still alive -> its name: a loader that takes
        # every tensor before loading any (EAGLE3's load_weights builds a dict first) loads
        # them after the feed ended, and only the tensor itself says which one it is.
        self._names: dict[int, str] = {}
        self.failed_tensor: str | None = None  # the tensor a loader raised on, after the feed ended
        self._in_loader = 0
        # A parameter's storage -> its name: a copy into it, a slice of it or its .data is a copy into it.
        self._storages: dict[int, str] = {}
        # Checkpoint tensor -> elements copied from it (or a view of it) into parameters.
        self.copied: dict[str, int] = {}
        for name, param in model.named_parameters(remove_duplicate=False):
            original = getattr(param, "weight_loader", None)
            had_own = original is not None
            loader = original if had_own else default_weight_loader
            self._wrap(param, name, loader, had_own)
            with contextlib.suppress(Exception):
                self._storages[param.untyped_storage()._cdata] = name
        # Persistent buffers are loaded too (AutoWeightsLoader hands them to
        # default_weight_loader: Gemma 4's per-layer `layer_scalar`); a copy into one reads
        # the tensor, as a copy into a parameter does.
        for name, buf in model.named_buffers(remove_duplicate=False):
            with contextlib.suppress(Exception):
                self._storages.setdefault(buf.untyped_storage()._cdata, name)

    @property
    def current(self) -> str | None:
        return self._current

    @current.setter
    def current(self, name: str | None) -> None:
        self._current = name
        self.current_fed = False

    def hand_out(self, name: str, tensor: Any) -> Any:
        """Watch the meta tensor handed out for `name`: a loader may hold it back (a weight
        buffered until its scale arrives) and load it later, under another current tensor."""

        key = id(tensor)

        def released(_ref: Any) -> None:
            if self._names.get(key) == name:
                del self._names[key]
            self._released(name)

        self._held[name] = weakref.ref(tensor, released)
        self._names[key] = name
        self._alive.setdefault(name.rpartition(".")[0], set()).add(name)
        return tensor

    def _handed_out(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The checkpoint tensor a weight_loader(param, loaded_weight) call was given, where it
        is one handed out (or a view of one)."""
        loaded = args[1] if len(args) > 1 else kwargs.get("loaded_weight")
        while loaded is not None:
            name = self._names.get(id(loaded))
            if name is not None:
                return name
            loaded = getattr(loaded, "_base", None)
        return None

    def _released(self, name: str) -> None:
        """A tensor freed right after another tensor's loading fed parameters was held back
        for that loading (vLLM's `_try_load_fp8_indexer_wk` dequantizes the FP8 `wk` once its
        scale arrives): it was read, though it fed no parameter as it is. One freed when the
        loop merely moved on was not."""
        self._held.pop(name, None)
        self._alive.get(name.rpartition(".")[0], set()).discard(name)
        held_for = self._held_for.pop(name, None)
        if held_for is not None and name not in self.fed:
            self.held_back.setdefault(name, held_for)
            return
        current = self._current
        if current is None or current == name or not self.current_fed or name in self.fed:
            return
        self.held_back[name] = current

    def _fed(self, name: str, tensor: str | None = None) -> None:
        tensor = tensor or self._current
        if tensor is not None:
            self.fed.setdefault(tensor, []).append(name)
            self.params_loaded_by_loader.add(name)
            self.current_fed = True
            self._credit_held_siblings(name.rpartition(".")[0], tensor)

    def _credit_held_siblings(self, module: str, tensor: str) -> None:
        """Tensors of the module just fed that a loader still holds, having fed nothing
        themselves, may have been held back for this loading: vLLM 0.31+
        `MiMoV2MTP.load_weights` keeps the FP8 fused `qkv_proj.weight` in a local until it
        returns, well after its scale's loading fed both parameters. Credited when the loader
        lets go of them (`_released`); one a loader keeps waiting for a partner that never
        comes (a pending dict on the module) was never read."""
        if not module:  # top-level buffers (EAGLE3's d2t, t2d) share no module
            return
        for held in self._alive.get(module, ()):
            if held != tensor and held not in self.fed:
                self._held_for.setdefault(held, tensor)

    def _wrap(self, param: Any, name: str, loader: Any, had_own: bool) -> None:
        def attributed(*args: Any, **kwargs: Any) -> Any:
            if _replaying[0]:
                return loader(*args, **kwargs)  # a buffered load again (online quantization)
            late = self._handed_out(args, kwargs) if self._current is None else None
            self._in_loader += 1
            try:
                result = loader(*args, **kwargs)
            except Exception:
                # vLLM's error text rarely names the parameter; the loader that raised does.
                self.failed_param = name
                self.failed_tensor = late
                raise
            finally:
                self._in_loader -= 1
            # FusedMoE loaders report "not mine" through return_success=False.
            if result is not False:
                self._fed(name, late)
            return result

        if getattr(loader, "__name__", "") == _ONLINE_LOADER:
            # vLLM unwraps its online-processing wrapper by name before it replays the
            # buffered loads (reload/layerwise.py): this one unwraps with it.
            attributed.__name__ = _ONLINE_LOADER
            attributed.__wrapped__ = loader  # type: ignore[attr-defined]
        try:
            param.weight_loader = attributed
        except AttributeError:
            return
        self._restore.append((param, loader, had_own))

    @contextlib.contextmanager
    def watching_copies(self) -> Iterator[None]:
        """Loads that bypass every weight_loader: a model's load_weights() copying into a
        parameter itself (vLLM 0.31 DeepSeek-V4 `params_dict[name][:n].copy_(...)` for
        `attn_sink`) or calling default_weight_loader directly. A copy into a parameter's
        storage outside a wrapped loader feeds that parameter."""
        import torch

        original = torch.Tensor.copy_

        def copy_(dest: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(dest, *args, **kwargs)
            if _replaying[0]:
                return out  # the buffered loads again (online quantization): counted when buffered
            with contextlib.suppress(Exception):
                self._count_copied(dest, args[0] if args else kwargs.get("src"))
            if not self._in_loader and self._current is not None:
                with contextlib.suppress(Exception):
                    name = self._storages.get(dest.untyped_storage()._cdata)
                    if name is not None and name not in self.fed.get(self._current, ()):
                        self._fed(name)
            return out

        torch.Tensor.copy_ = copy_  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            torch.Tensor.copy_ = original  # type: ignore[method-assign]

    def _count_copied(self, dest: Any, src: Any) -> None:
        """Elements of a handed-out checkpoint tensor (through any view of it: the narrow() a
        weight loader takes) copied into a parameter's storage."""
        if src is None or self._storages.get(dest.untyped_storage()._cdata) is None:
            return
        numel, root = src.numel(), src
        while root is not None:
            name = self._names.get(id(root))
            if name is not None:
                self.copied[name] = self.copied.get(name, 0) + numel
                return
            root = getattr(root, "_base", None)

    def restore(self) -> None:
        for param, loader, had_own in self._restore:
            if had_own:
                param.weight_loader = loader
            else:
                with contextlib.suppress(AttributeError):
                    del param.weight_loader


def _completeness_switch() -> Any:
    """vLLM's switch that defers the MTP completeness check, or a no-op where this vLLM
    has none (the check then runs inside each load_weights() call)."""
    try:
        from vllm.model_executor.model_loader.mtp_validation import disable_mtp_completeness_check
    except ImportError:
        return contextlib.nullcontext
    return disable_mtp_completeness_check


def run(
    model: Any,
    tensors: list[tuple[str, str, list[int]]],
    *,
    mtp_completeness: bool = False,
    elide: bool = True,
    tp: int = 1,
    quantized: bool = True,
) -> DryRun:
    """Feed `tensors` (name, dtype, shape) to model.load_weights; resume after errors. Then
    the default loader's own completeness check where vLLM runs it (`quantized`: the model
    config names a quantization, which turns it off). `tp`: the tensor-parallel size the model
    was built for (this is rank 0 of it)."""
    import time

    from . import expert_parallel

    started = time.perf_counter()
    result = DryRun()
    ep = expert_parallel.layout(model)
    owner = ep.owner if ep is not None else None
    keep, result.elided = plan_elision(model, tensors, owner) if elide else (list(range(len(tensors))), {})
    feed = _Feed([tensors[i] for i in keep], _Attribution(model))
    try:
        with (
            _recording_mapper_drops(feed.attribution, result.discarded),
            _recording_stage_skips(feed.attribution, result.discarded),
            feed.attribution.watching_copies(),
            _online_processing_on_meta(),
        ):
            failed, replay = _load_resuming(model, feed, result, mtp_completeness)
        if replay:
            _replay_for_completeness(model, [t for t in feed.tensors if t[0] not in failed], result)
        if not result.errors and result.completeness_error is None:
            _track_weights_loading(model, result, quantized)
    finally:
        feed.attribution.restore()
    result.fed = feed.attribution.fed
    # A sibling credited while still held, then fed itself (EAGLE3 loads every tensor after
    # taking them all), was read as it is.
    result.held_back = {t: by for t, by in feed.attribution.held_back.items() if t not in result.fed}
    result.params_loaded_by_loader = feed.attribution.params_loaded_by_loader
    result.truncated = _truncated(feed.tensors, feed.attribution.copied, tp, result.fed)
    if ep is not None and ep.owner:
        _other_ep_ranks(model, feed.tensors, ep, result)
    _attribute_elided(result)
    result.seconds = time.perf_counter() - started
    return result


def _other_ep_ranks(model: Any, tensors: list[tuple[str, str, list[int]]], ep: Any, result: DryRun) -> None:
    """The experts EP ranks 1..N-1 load, each fed to the model moved to that rank (rank 0 fed
    everything already and took its own). Errors after the last tensor belong to the
    completeness checks, which the whole feed on rank 0 answered."""
    from . import expert_parallel

    seen = {(e.tensor, e.message) for e in result.errors}
    for rank in range(1, ep.size):
        own = [tensors[i] for i in expert_parallel.owned_by(tensors, ep.owner, rank)]
        if not own:
            continue
        sub = DryRun()
        feed = _Feed(own, _Attribution(model))
        try:
            with (
                expert_parallel.at_rank(ep.layers, rank),
                feed.attribution.watching_copies(),
                _recording_mapper_drops(feed.attribution, result.discarded),
                _online_processing_on_meta(),
            ):
                _load_resuming(model, feed, sub, mtp_completeness=False)
        finally:
            feed.attribution.restore()
        for tensor, params in feed.attribution.fed.items():
            fed = result.fed.setdefault(tensor, [])
            fed += [p for p in params if p not in fed]
        result.params_loaded_by_loader |= feed.attribution.params_loaded_by_loader
        for error in sub.errors:
            if error.tensor is not None and (error.tensor, error.message) not in seen:
                seen.add((error.tensor, error.message))
                result.errors.append(error)
        for tensor, by in feed.attribution.held_back.items():
            if tensor not in result.fed:
                result.held_back.setdefault(tensor, by)


_DIGITS = re.compile(r"\d+")


def _same_tensor(key: str, tensor: str) -> bool:
    """Whether a name a mapper sees is (a renaming of) the checkpoint tensor being fed: same
    leaf, same layer and expert indices. A loader that buffers tensors maps other names
    while a later one is current."""
    return key.rsplit(".", 1)[-1] == tensor.rsplit(".", 1)[-1] and _DIGITS.findall(key) == _DIGITS.findall(tensor)


@contextlib.contextmanager
def _recording_mapper_drops(attribution: _Attribution, dropped: dict[str, str]) -> Iterator[None]:
    """Record the checkpoint tensors a vLLM WeightsMapper maps to None while they are fed:
    tensors the loaders discard by design (the quant config's checkpoint weight mapper drops
    GPTQ `.g_idx`, AutoWeightsLoader drops rotary buffers), which feed nothing on purpose."""
    try:
        from vllm.model_executor.models.utils import WeightsMapper
    except ImportError:
        yield
        return
    # The innermost mapping function of this release (0.20: _map_name; 0.29+: with shards).
    attr = "_map_name_with_shard" if "_map_name_with_shard" in vars(WeightsMapper) else "_map_name"
    original = vars(WeightsMapper)[attr]

    def mapping(self: Any, key: str) -> Any:
        result = original(self, key)
        current = attribution.current
        if result is None and current is not None and _same_tensor(key, current):
            dropped.setdefault(current, key)
        return result

    setattr(WeightsMapper, attr, mapping)
    try:
        yield
    finally:
        setattr(WeightsMapper, attr, original)


@contextlib.contextmanager
def _recording_stage_skips(attribution: _Attribution, dropped: dict[str, str]) -> Iterator[None]:
    """Record the checkpoint tensors AutoWeightsLoader passes over because their module is a
    StageMissingLayer: a tower vLLM did not build on purpose (`--language-model-only`, or every
    modality's `--limit-mm-per-prompt` 0: `_mark_tower_model`), so its tensors are unused by
    design, not lost."""
    try:
        from vllm.model_executor.models.utils import AutoWeightsLoader, StageMissingLayer
    except ImportError:  # releases before stage-missing towers
        yield
        return
    original = vars(AutoWeightsLoader)["_load_module"]

    def load_module(self: Any, base_prefix: str, module: Any, weights: Any) -> Any:
        if not isinstance(module, StageMissingLayer):
            return original(self, base_prefix, module, weights)
        stage = getattr(module, "stage_name", "stage")
        for _ in weights:
            if attribution.current is not None:
                dropped.setdefault(attribution.current, f"{stage} not built")
        return iter(())

    AutoWeightsLoader._load_module = load_module  # type: ignore[method-assign]
    try:
        yield
    finally:
        AutoWeightsLoader._load_module = original  # type: ignore[method-assign]


class _Feed:
    """The tensors load_weights() is fed, from any start, and how far it got: when it
    raises, the key the generator last handed out is the one being loaded."""

    def __init__(self, tensors: list[tuple[str, str, list[int]]], attribution: _Attribution):
        self.tensors = tensors
        self.attribution = attribution
        self.position = 0

    def starting_at(self, start: int) -> Iterator[tuple[str, Any]]:
        for i in range(start, len(self.tensors)):
            name, dtype, shape = self.tensors[i]
            self.position = i
            self.attribution.current = name
            yield name, self.attribution.hand_out(name, meta_tensor(dtype, shape))
        self.position = len(self.tensors)
        self.attribution.current = None

    def index(self, name: str) -> int:
        return next(i for i, t in enumerate(self.tensors) if t[0] == name)

    @property
    def culprit(self) -> str | None:
        return self.tensors[self.position][0] if self.position < len(self.tensors) else None


def _load_resuming(model: Any, feed: _Feed, result: DryRun, mtp_completeness: bool) -> tuple[set[str], bool]:
    """Run load_weights() over the feed, resuming after the tensor that raised, so one run
    reports every error. Returns the tensors that failed, and whether the completeness check
    is still to be made by a replay."""
    disable_completeness = _completeness_switch()
    failed: set[str] = set()
    start = 0
    while start <= len(feed.tensors):
        with disable_completeness():
            try:
                loaded = model.load_weights(feed.starting_at(start))
                if loaded is not None:
                    result.returned_loaded = True
                    result.loaded_params |= set(loaded)
                break
            except Exception as exc:
                late, feed.attribution.failed_tensor = feed.attribution.failed_tensor, None
                culprit = feed.culprit or late
                if culprit is None and mtp_completeness and _checked_completeness_itself(exc, disable_completeness):
                    # vLLM before mtp_validation (< 0.27) checks completeness at the end of
                    # every load_weights() call and cannot be told not to. After an
                    # uninterrupted call that is the verdict; after a resume it saw only the
                    # tail, and the replay decides.
                    if start == 0:
                        result.completeness_error = error_record(exc)
                        mtp_completeness = False
                    break
                record = error_record(exc, LoadError, tensor=culprit, param=feed.attribution.failed_param)
                record.message = _set_sorted(str(exc).strip())[: len(record.message)]
                result.errors.append(record)
                feed.attribution.failed_param = None
                if culprit is None or culprit in failed:
                    break
                failed.add(culprit)
                # A loader that took every tensor first loaded those before the culprit already.
                start = feed.index(late) + 1 if late else feed.position + 1
    return failed, mtp_completeness


# What vLLM's MTP completeness checks raise: ValueError (deepseek_mtp.py, bailing_moe_mtp.py),
# RuntimeError (step3p5_mtp.py).
_COMPLETENESS_ERRORS = (ValueError, RuntimeError)


def _checked_completeness_itself(exc: Exception, disable_completeness: Any) -> bool:
    """An error after the last tensor, from a vLLM that cannot defer its completeness check."""
    return isinstance(exc, _COMPLETENESS_ERRORS) and disable_completeness is contextlib.nullcontext


def _replay_for_completeness(model: Any, clean: list[tuple[str, str, list[int]]], result: DryRun) -> None:
    """vLLM validates completeness at the end of one load_weights() call, so it is run once
    over every tensor that loaded cleanly (a replay, cheap for drafts). These tensors loaded
    without an error with the check deferred: whatever the replay raises, whichever class the
    family's check raises, is the completeness check's verdict."""
    try:
        model.load_weights((n, meta_tensor(d, s)) for n, d, s in clean)
    except Exception as exc:
        result.completeness_error = error_record(exc)


def _truncated(
    tensors: list[tuple[str, str, list[int]]], copied: dict[str, int], tp: int, fed: dict[str, list[str]] | None = None
) -> dict[str, list[int]]:
    """Tensors of which some, but less than a rank's share (1/tp), reached parameters through
    copies of views of them. A tensor copied not at all (dequantized first, written another
    way) is not judged: nothing says which of its elements were used. Experts (a tensor that
    feeds an `experts` parameter, per expert or fused) are split over DP x PCP x TP ranks
    (vLLM's FusedMoEParallelConfig flattens them, sharded without EP, whole experts with it)."""
    out: dict[str, list[int]] = {}
    experts_tp = tp * _flattened_across()
    for name, _dtype, shape in tensors:
        n = copied.get(name, 0)
        numel = 1
        for d in shape:
            numel *= d
        into_experts = ".experts." in name or any(".experts." in p for p in (fed or {}).get(name, ()))
        ranks = experts_tp if into_experts else tp
        if n > 0 and n * ranks < numel:
            out[name] = [n, numel]
    return out


def _flattened_across() -> int:
    """DP x PCP: the ranks beside TP over which vLLM shards experts without EP."""
    factor = 1
    try:
        from vllm.distributed import parallel_state
    except ImportError:
        return factor
    for getter in ("get_dp_group", "get_pcp_group"):
        with contextlib.suppress(Exception):
            factor *= max(1, int(getattr(parallel_state, getter)().world_size))
    return factor


def _track_weights_loading(model: Any, result: DryRun, quantized: bool) -> None:
    """After a load that raised nothing, the check `DefaultModelLoader.load_weights` runs
    at start-up: on by default for an unquantized model whose load_weights() returned what
    it loaded, it raises "Following weights were not initialized from checkpoint" for every
    parameter nothing loaded (modules whose quant method post-processes weights are exempt).
    vLLM's own method, where this release has it; a release without it is not replayed."""
    try:
        from vllm.model_executor.model_loader.default_loader import DefaultModelLoader
    except ImportError:
        return
    track = getattr(DefaultModelLoader, "track_weights_loading", None)
    if track is None or quantized or not result.returned_loaded:
        return
    # What load_weights() returned, as vLLM passes it (elided expert tensors fill the same
    # fused parameters as their representatives, which are returned).
    try:
        track(object.__new__(DefaultModelLoader), model, set(result.loaded_params), quantized=False)
    except ValueError as exc:
        result.completeness_error = error_record(_names_sorted(exc))
    except TypeError:
        return  # another signature in this release: not replayed


def _names_sorted(exc: ValueError) -> ValueError:
    """vLLM's message with the set of names it prints in sorted order (see _set_sorted)."""
    message = str(exc)
    sorted_message = _set_sorted(message)
    if sorted_message == message:
        return exc
    sorted_exc = ValueError(sorted_message)
    sorted_exc.__traceback__ = exc.__traceback__
    return sorted_exc


def _set_sorted(message: str) -> str:
    """A message ending in a Python set literal of names, with the names in sorted order: a
    set's order follows the process's string hashing, and a report must not change from one
    probe to the next (track_weights_loading's unloaded names, AutoWeightsLoader's "available
    parameters")."""
    import ast

    head, brace, rest = message.partition("{")
    if not brace or not rest.endswith("}"):
        return message
    try:
        names = ast.literal_eval("{" + rest)
    except (ValueError, SyntaxError):
        return message
    if not isinstance(names, set) or not all(isinstance(n, str) for n in names):
        return message
    return head + "{" + ", ".join(repr(n) for n in sorted(names)) + "}"


def _attribute_elided(result: DryRun) -> None:
    """Each elided tensor fed, and failed, as the representative it was elided like."""
    errors_by_tensor = {e.tensor: e for e in result.errors if e.tensor}
    for name, rep in result.elided.items():
        if rep in result.fed:
            result.fed[name] = list(result.fed[rep])
        if rep in result.discarded:
            result.discarded[name] = result.discarded[rep]
        if rep in result.held_back:
            result.held_back[name] = result.held_back[rep]
        if rep in result.truncated:
            result.truncated[name] = list(result.truncated[rep])
        if rep in errors_by_tensor:
            result.errors.append(dataclasses.replace(errors_by_tensor[rep], tensor=name, elided_like=rep))
