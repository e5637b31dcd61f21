"""The probe report: what the probe child writes and the checks read, as dataclasses.

The one contract between the child process (lint/probe/child/entry.py, in whatever environment
holds vLLM) and the parent (cache, rule checks, fixes). Standard library only: the child
imports this inside vLLM environments that have no mtplint dependencies.

`to_json()` gives the JSON form; `from_json()` validates one and raises a ValueError naming
the first bad field (`report.load['draft'].errors[3].tensor: expected str or null, got int`).
The large tensor -> parameters lists are shared between a report and its JSON form, not
copied: treat both as read-only once converted.
Every field is always written, so a JSON form missing one, or holding one this schema does
not know, is not a report of this version.

SCHEMA_VERSION is the one number to bump when the format or what the child records changes:
it is part of the probe cache key, of every cache entry and of the report itself.
"""

from __future__ import annotations

import dataclasses
import itertools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

SCHEMA_VERSION = 2
REPORT_SCHEMA = f"mtplint/probe/v{SCHEMA_VERSION}"

Model = Literal["target", "draft"]
MODELS: tuple[Model, ...] = ("target", "draft")
Matcher = Literal["direct", "outcome"]
KernelStatus = Literal["not-applicable", "native", "fallback", "unsupported", "unknown"]


class Layer(NamedTuple):
    """A module vLLM built, by model and construction prefix. The JSON form is
    "model:prefix" (a prefix never holds a colon); in memory it is never split again."""

    model: Model
    prefix: str

    def __str__(self) -> str:
        return f"{self.model}:{self.prefix}"

    @classmethod
    def parse(cls, text: str) -> Layer:
        model, sep, prefix = text.partition(":")
        if not sep:
            raise ValueError(f"expected 'model:prefix', got {text!r:.80}")
        if model == "target":
            return cls("target", prefix)
        if model == "draft":
            return cls("draft", prefix)
        raise ValueError(f"model {model!r:.20} in {text!r:.80} is neither 'target' nor 'draft'")


# --- records -----------------------------------------------------------------------------


@dataclass
class Frame:
    """The innermost traceback frame inside the vllm package: where vLLM itself raised."""

    file: str  # relative to site-packages: `vllm/model_executor/...`
    line: int | None
    function: str
    code: str | None


@dataclass
class ConfigRewrite:
    """A config.json field the configuration class vLLM used reads as another value: the
    checkpoint names its own class (auto_map AutoConfig), which runs only with --trust-remote-code."""

    declared: Any
    read: Any
    config_class: str  # the class vLLM used ("transformers....BailingHybridConfig")
    auto_config: str  # the class config.json names ("configuration_x.XConfig")


@dataclass
class ErrorRecord:
    """An exception raised inside vLLM."""

    type: str  # the exception's class name
    message: str
    frame: Frame | None = None


@dataclass
class LoadError(ErrorRecord):
    """An exception while load_weights() loaded one checkpoint tensor."""

    tensor: str | None = None  # the tensor being loaded (None: raised after the last one)
    param: str | None = None  # the parameter whose weight loader raised, when one did
    # Not fed itself (dry-run elision): raised like this representative tensor did.
    elided_like: str | None = None


@dataclass
class WiringError(ErrorRecord):
    step: str | None = None  # the proposer's post-load step that raised


# Fields added within a schema version: written only when non-empty, so reports recorded
# before them round-trip unchanged.
OMIT_EMPTY = {"omit_empty": True}


@dataclass
class Decision:
    """One `quant_config.get_quant_method(layer, prefix)` answer during construction (or the
    method a layer was built with where none was asked)."""

    model: Model
    prefix: str  # the prefix vLLM passed
    layer_class: str
    method: str | None  # class name of the quant method (None: the config returned None)
    scheme: str | None  # compressed-tensors scheme class, when one was chosen
    module: str | None  # the module's path in named_modules() (differs from prefix in MTP blocks)
    # The names the format's own exclusion matcher was called with while vLLM decided this
    # layer (compressed-tensors MoE: `{prefix}.0.{gate,up,down}_proj`, not the prefix); empty
    # where none was recorded.
    compared: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)

    @property
    def module_path(self) -> str:
        """The module's path where known, else its construction prefix."""
        return self.module or self.prefix


@dataclass
class ParamInfo:
    shape: list[int]
    dtype: str  # torch dtype without `torch.`
    module_class: str | None  # class of the module that registers it


@dataclass
class Elision:
    """Per-expert tensors not fed (identical in kind to a fed one)."""

    tensors: int
    groups: int
    rule: str


@dataclass
class LoadResult:
    """One model's dry-run load_weights()."""

    fed: dict[str, list[str]] = field(default_factory=dict)  # checkpoint tensor -> parameters it fed
    errors: list[LoadError] = field(default_factory=list)
    loaded_params: list[str] = field(default_factory=list)  # what load_weights() returned
    # Parameters whose weight_loader accepted a tensor.
    params_loaded_by_loader: list[str] = field(default_factory=list)
    completeness_error: ErrorRecord | None = None  # vLLM's MTP completeness check (draft)
    elided: Elision = field(default_factory=lambda: Elision(0, 0, ""))
    # Checkpoint tensor -> the name a vLLM WeightsMapper mapped to None while it was fed: a
    # tensor the loaders discard by design (GPTQ `.g_idx`, rotary buffers), not an oversight.
    discarded: dict[str, str] = field(default_factory=dict, metadata=OMIT_EMPTY)
    # Checkpoint tensor -> the tensor whose loading read it: buffered by the loader until that
    # partner arrived (DeepSeek-V3.2's FP8 indexer `wk` waits for its scale), so it fed no
    # parameter as it is.
    held_back: dict[str, str] = field(default_factory=dict, metadata=OMIT_EMPTY)
    # Checkpoint tensor -> [elements its loading copied into parameters on this rank, elements
    # it holds], for a tensor of which less than 1/TP reached a parameter: the loader narrow()ed
    # it to a parameter smaller than the tensor (a config that under-states head counts or
    # sizes) and dropped the rest without an error.
    truncated: dict[str, list[int]] = field(default_factory=dict, metadata=OMIT_EMPTY)


@dataclass
class Wiring:
    """The speculative proposer's post-load sharing, replayed with vLLM's own code."""

    proposer: str | None
    steps: list[str] = field(default_factory=list)  # the steps that ran
    shared: dict[str, str] = field(default_factory=dict)  # draft parameter -> the target's it now is
    errors: list[WiringError] = field(default_factory=list)
    # What the draft holds after wiring (None: no proposer to replay).
    draft_params_after: list[str] | None = None


@dataclass
class ExclusionSection:
    """One exclusion list of the quant config, each entry evaluated with vLLM's own matcher."""

    attr: str | None  # the attribute the list is read from (None: the config has none)
    matcher: Matcher | None  # the format's own matcher, or get_quant_method re-asked per entry
    entries: dict[str, list[Layer]] = field(default_factory=dict)  # entry as matched -> the layers it excludes
    errors: dict[str, str] = field(default_factory=dict)  # entry or str(Layer) -> what the matcher raised
    # Lists a config reads through a method of its own: the quantization_config key, and the method.
    config_key: str | None = None
    via: str | None = None
    # {layer vLLM asked the list about: the name it compared the entries with}; None for a
    # list read the usual way.
    consulted: dict[Layer, str | None] | None = None
    # {entry as matched: entry as written in the config}, where vLLM rewrote the list first.
    as_written: dict[str, str] = field(default_factory=dict)
    # Entry -> the (model, module) it names among the Linears vLLM builds without asking the quant
    # config (`eh_proj = nn.Linear`): the entry declares them unquantized, it excludes nothing
    # today, and it is what keeps them unquantized once vLLM routes them through the config.
    undecided: dict[str, list[Layer]] = field(default_factory=dict, metadata=OMIT_EMPTY)
    # The config declared no list and vLLM filled it from the checkpoint's own dtypes at
    # start-up (AWQ `maybe_update_config`): "Class.maybe_update_config". Its entries are
    # vLLM's, not the author's: no finding is about them.
    filled_by: str = field(default="", metadata=OMIT_EMPTY)


@dataclass
class KernelCheck:
    predicate: str
    next_n: int
    result: bool | None = None
    error: str | None = None  # the predicate raised


@dataclass
class Kernels:
    next_n: int
    uses_sparse_indexer: bool
    status: KernelStatus
    checks: list[KernelCheck] = field(default_factory=list)


@dataclass
class ModelInfo:
    model_class: str | None  # module.qualname of the built model (None: construction failed)
    architecture: str
    n_predict: int | None = None  # the draft's n_predict


@dataclass
class Quant:
    method: str | None
    config_class: str | None
    draft_method: str | None


@dataclass
class VllmIdentity:
    version: str | None
    commit: str | None


@dataclass
class Request:
    """What the probe modelled (the child's request without its file paths)."""

    sm: list[int]
    gpu_name: str
    gpu_memory: int
    num_speculative_tokens: int = 1
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    patches: list[str] = field(default_factory=list)
    serve_args: dict[str, str] = field(default_factory=dict)
    elide: bool = True  # feed only the edge experts of identical per-expert tensor runs
    trust_remote_code: bool = False
    # The speculative method a draft from its own checkpoint (`--draft`) is served with
    # ({"method": "eagle3"}), or a drafter the target carries that is not MTP ({"method":
    # "dspark"}, no --draft). Empty: the checkpoint's own MTP block (`"method": "mtp"`).
    speculative: dict[str, str] = field(default_factory=dict, metadata=OMIT_EMPTY)
    # The user's own `vllm serve` command after `vllm serve`, as written, parsed by the probed
    # vLLM's own parser; the fields above are its defaults where it leaves a flag out.
    serve_argv: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)
    # An AMD GPU's gfx architecture (`gfx942`): vLLM's ROCm platform is probed. Empty: CUDA.
    arch: str = field(default="", metadata=OMIT_EMPTY)
    # The environment the serve command was written with (`VLLM_USE_DEEP_GEMM=0 vllm serve ...`):
    # the probe child runs with it, as the server would.
    serve_env: dict[str, str] = field(default_factory=dict, metadata=OMIT_EMPTY)

    def platform(self) -> dict[str, Any]:
        """The part of a request that is fixed at import time: the GPU the platform shim stands in
        (vLLM modules bind `current_platform` when they are imported). A probe worker serves
        only requests with the platform it was started with."""
        return {
            "sm": list(self.sm),
            "gpu_name": self.gpu_name,
            "gpu_memory": self.gpu_memory,
            "gpus": max(8, self.tensor_parallel_size * self.pipeline_parallel_size, _serve_world(self.serve_argv)),
            **({"arch": self.arch} if self.arch else {}),
        }


def _serve_world(argv: list[str]) -> int:
    """The GPU count the platform shim must offer for a serve command, before vLLM reads it
    (the platform is fixed when vLLM is imported): the product of the largest TP and PP values
    the command spells out. It only sizes the fake platform; the probe models what vLLM reads."""
    sizes = {"tp": 1, "pp": 1}
    names = {
        "-tp": "tp",
        "--tensor-parallel-size": "tp",
        "--tensor_parallel_size": "tp",
        "-pp": "pp",
        "--pipeline-parallel-size": "pp",
        "--pipeline_parallel_size": "pp",
    }
    for i, token in enumerate(argv):
        flag, eq, inline = token.partition("=")
        if flag in names:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if value.isdigit():
                sizes[names[flag]] = max(sizes[names[flag]], int(value))
    return sizes["tp"] * sizes["pp"]


@dataclass
class ChildRequest(Request):
    """The parent's request to the probe child (request.json): what to model, and where the
    parent staged the checkpoint's config and tensor headers (a draft's too, for --draft)."""

    config_dir: str = ""
    tensors_file: str = ""
    draft_config_dir: str | None = None  # set: a draft from its own checkpoint (--draft)
    draft_tensors_file: str | None = None
    # The model of the user's serve command as mtplint read it (the checkpoint it staged):
    # the child confirms vLLM's parser reads the same.
    serve_model: str | None = None

    def modelled(self) -> Request:
        """What the report says was modelled: the request without its file paths (a draft's
        name as written among them)."""
        modelled = Request(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Request)})
        modelled.speculative = {k: v for k, v in self.speculative.items() if k != "model"}
        return modelled

    def to_json(self) -> dict[str, Any]:
        return typing.cast(dict[str, Any], _codec(ChildRequest)[1](self))

    @classmethod
    def from_json(cls, data: Any) -> ChildRequest:
        """The request in `data`; ValueError naming the first bad field."""
        return typing.cast(ChildRequest, _codec(ChildRequest)[0](data, "request"))


@dataclass
class PatchRecord:
    """A runtime patch applied in the probe: what its apply() returned."""

    id: str
    status: str
    replaced: list[str] = field(default_factory=list)  # "module:function" it replaced
    details: dict[str, Any] = field(default_factory=dict)  # anything else apply() said

    @classmethod
    def from_apply(cls, patch_id: str, result: dict[str, Any]) -> PatchRecord:
        rest = dict(result)
        rest.pop("id", None)  # the record's own field
        return cls(
            id=patch_id, status=str(rest.pop("status", "")), replaced=list(rest.pop("replaced", [])), details=rest
        )


@dataclass
class UncheckedStep:
    """A start-up step of `vllm serve` the probe left out of its replay, because it needs
    something the probe cannot have (a tokenizer the checkpoint does not ship, a GPU-only
    package): the environment's limit, not a finding about the checkpoint."""

    step: str  # what vLLM does at that step
    flag: str  # the serve flag that asks for it
    why: str  # what the probe lacks
    package: str = ""  # the absent package, where that is the reason


@dataclass
class ProbeReport:
    vllm: VllmIdentity
    request: Request
    stubbed_modules: list[str] = field(default_factory=list)
    # GPU-only packages the probed vLLM requires that the probe's interpreter lacks (a
    # provisioned environment never installs them) and that one of the report's errors names:
    # vLLM's checks for their kernels fail here whatever the checkpoint.
    absent_gpu_packages: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)
    # Start-up steps the command asks for that the probe did not replay (unchecked_steps.py).
    unchecked_steps: list[UncheckedStep] = field(default_factory=list, metadata=OMIT_EMPTY)
    patches: list[PatchRecord] = field(default_factory=list)
    # Set where vLLM's config classes refused the inputs: nothing below it was built.
    config_error: ErrorRecord | None = None
    # The probed vLLM's argument parser rejected the user's serve command: its own message.
    serve_args_rejected: str = field(default="", metadata=OMIT_EMPTY)
    models: dict[str, ModelInfo] = field(default_factory=dict)  # "target"/"draft" -> what was chosen
    # The switches vLLM read from the command that forward-pass defects depend on
    # (probe/child/switches.py: enforce_eager, attention_backend), where set away from the defaults.
    served_with: dict[str, str] = field(default_factory=dict, metadata=OMIT_EMPTY)
    draft_hf_config: dict[str, Any] | None = None
    # config.json's fields ("head_dim", "text_config.head_dim") that the built-in configuration
    # class read differently from what the checkpoint's own (auto_map, not run) declares.
    config_rewrites: dict[str, ConfigRewrite] = field(default_factory=dict, metadata=OMIT_EMPTY)
    # The draft's attention layers (construction prefix) -> the sliding window vLLM built each
    # with (None: full attention): what the release made of the draft's layer_types/sliding_window.
    draft_attention_windows: dict[str, int | None] = field(default_factory=dict, metadata=OMIT_EMPTY)
    quant: Quant | None = None
    construction_errors: dict[str, ErrorRecord] = field(default_factory=dict)  # model -> why it failed to build
    decisions: list[Decision] = field(default_factory=list)
    params: dict[str, dict[str, ParamInfo]] = field(default_factory=dict)  # model -> parameter -> info
    load: dict[str, LoadResult] = field(default_factory=dict)  # model (built ones only) -> its dry-run load
    wiring: Wiring | None = None
    exclusions: list[ExclusionSection] = field(default_factory=list)  # the usual list first
    kernels: Kernels | None = None
    timings: dict[str, float] = field(default_factory=dict)
    peak_rss_mib: float | None = None
    # Set by the parent: wall time of the child, and whether the report came from the cache.
    seconds: float = 0.0
    cached: bool = False
    schema: str = REPORT_SCHEMA

    @property
    def usual_exclusions(self) -> ExclusionSection | None:
        """The exclusion list the quant config reads for every layer (`ignore`,
        `ignored_layers`, `modules_to_not_convert`, ...): the probe records it first; the others
        are lists a config reads through a method of its own, for some layers."""
        return self.exclusions[0] if self.exclusions else None

    def to_json(self) -> dict[str, Any]:
        return typing.cast(dict[str, Any], _codec(ProbeReport)[1](self))

    @classmethod
    def from_json(cls, data: Any) -> ProbeReport:
        """The report in `data` (a parsed JSON value); ValueError naming the first bad field."""
        if isinstance(data, dict) and data.get("schema") != REPORT_SCHEMA:
            raise ValueError(f"report.schema: {data.get('schema')!r:.40}, expected {REPORT_SCHEMA!r}")
        decode = _codec(ProbeReport)[0]
        try:
            # Without paths first: naming each of 100k+ values costs more than decoding them.
            return typing.cast(ProbeReport, decode(data, None))
        except ValueError:
            pass
        return typing.cast(ProbeReport, decode(data, "report"))  # raises, naming the bad field


# --- JSON codec: one (decode, encode) pair per annotated type, built once -----------------

# A decoder's path names the value in its errors; None: decode fast, the caller retries with
# paths to name the bad field once one is known to be there.
Decode = Callable[[Any, str | None], Any]
Encode = Callable[[Any], Any]
_CODECS: dict[Any, tuple[Decode, Encode]] = {}


def _bad(path: str | None, expected: str, value: Any) -> ValueError:
    got = "null" if value is None else type(value).__name__
    return ValueError(f"{path}: expected {expected}, got {got}")


def _same(value: Any) -> Any:
    return value


def _scalar(kind: type) -> tuple[Decode, Encode]:
    name = {str: "str", int: "int", float: "number", bool: "bool"}[kind]

    def decode(value: Any, path: str | None) -> Any:
        if kind is float and type(value) in (int, float):
            return float(value)
        if type(value) is not kind:
            raise _bad(path, name, value)
        return value

    return decode, _same


def _optional(inner: tuple[Decode, Encode], name: str) -> tuple[Decode, Encode]:
    dec, enc = inner

    def decode(value: Any, path: str | None) -> Any:
        if value is None:
            return None
        try:
            return dec(value, path)
        except ValueError as exc:
            if str(exc).startswith(f"{path}: expected "):  # this value itself, not a field inside it
                raise _bad(path, f"{name} or null", value) from None
            raise

    return decode, lambda value: None if value is None else enc(value)


def _list(item: Any) -> tuple[Decode, Encode]:
    dec, enc = _codec(item)
    if item in (str, int):

        def decode_scalars(value: Any, path: str | None) -> Any:
            if type(value) is not list:
                raise _bad(path, "list", value)
            if all(type(x) is item for x in value):
                return list(value)
            for i, x in enumerate(value):
                dec(x, f"{path}[{i}]")
            raise AssertionError("unreachable")

        return decode_scalars, list

    def decode(value: Any, path: str | None) -> Any:
        if type(value) is not list:
            raise _bad(path, "list", value)
        if path is None:
            return [dec(x, None) for x in value]
        return [dec(x, f"{path}[{i}]") for i, x in enumerate(value)]

    return decode, lambda value: [enc(x) for x in value]


def _literal(allowed: tuple[Any, ...]) -> tuple[Decode, Encode]:
    name = " | ".join(repr(a) for a in allowed)

    def decode(value: Any, path: str | None) -> Any:
        if value not in allowed or type(value) is not type(allowed[0]):
            raise ValueError(f"{path}: expected {name}, got {value!r:.60}")
        return value

    return decode, _same


def _layer() -> tuple[Decode, Encode]:
    def decode(value: Any, path: str | None) -> Any:
        if type(value) is not str or ":" not in value:
            raise _bad(path, "'model:prefix' string", value)
        return Layer.parse(value)

    return decode, str


def _layer_keyed(item: Any) -> tuple[Decode, Encode]:
    """{Layer: item} as a JSON object keyed by "model:prefix"."""
    by_text_dec, by_text_enc = _dict(item)

    def decode(value: Any, path: str | None) -> Any:
        decoded = by_text_dec(value, path)
        bad = next((k for k in decoded if ":" not in k), None)
        if bad is not None:
            raise ValueError(f"{path}: key {bad!r:.80} is not 'model:prefix'")
        return {Layer.parse(k): v for k, v in decoded.items()}

    return decode, lambda value: by_text_enc({str(k): v for k, v in value.items()})


def _all_str_lists(value: dict[str, Any]) -> bool:
    # Types collected in C (map, chain, set): a generator per list cost ~5x as much on 100k lists.
    values = value.values()
    return set(map(type, values)) <= {list} and set(map(type, itertools.chain.from_iterable(values))) <= {str}


def _dict(item: Any) -> tuple[Decode, Encode]:
    dec, enc = _codec(item)
    if item == list[str]:
        # The dry run's tensor -> parameters maps: 100k+ entries, checked without a call each,
        # and their lists shared with the JSON form rather than copied (neither side changes them).
        def decode_str_lists(value: Any, path: str | None) -> Any:
            if type(value) is not dict:
                raise _bad(path, "object", value)
            if _all_str_lists(value):
                return dict(value)
            return {k: dec(v, None if path is None else f"{path}[{k!r}]") for k, v in value.items()}

        return decode_str_lists, dict

    def decode(value: Any, path: str | None) -> Any:
        if type(value) is not dict:
            raise _bad(path, "object", value)
        if path is None:
            return {k: dec(v, None) for k, v in value.items()}
        return {k: dec(v, f"{path}[{k!r}]") for k, v in value.items()}

    return decode, lambda value: {k: enc(v) for k, v in value.items()}


def _defaulted(cls: type) -> set[str]:
    """Fields added within a schema version (OMIT_EMPTY): they may be absent, so reports
    recorded before them still load; every other field must be there."""
    return {f.name for f in dataclasses.fields(cls) if f.metadata.get("omit_empty")}


def _record(cls: type) -> tuple[Decode, Encode]:
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    known = set(fields)
    optional = _defaulted(cls)
    # Filled on first use: records refer to each other.
    codecs: list[tuple[str, Decode, Encode]] = []

    def resolve() -> list[tuple[str, Decode, Encode]]:
        if not codecs:
            codecs.extend((name, *_codec(hints[name])) for name in fields)
        return codecs

    def decode(value: Any, path: str | None) -> Any:
        if type(value) is not dict:
            raise _bad(path, f"{cls.__name__} object", value)
        unknown = next((key for key in value if key not in known), None)
        if unknown is not None:
            raise ValueError(f"{path}: unknown field {unknown!r:.60}")
        kwargs = {}
        for name, dec, _enc in resolve():
            if name in value:
                kwargs[name] = dec(value[name], None if path is None else f"{path}.{name}")
            elif name not in optional:
                raise ValueError(f"{path}.{name}: missing")
        return cls(**kwargs)

    omitted = _defaulted(cls)

    def encode(value: Any) -> Any:
        return {
            name: enc(v)
            for name, _dec, enc in resolve()
            if not ((v := getattr(value, name)) == {} or v == [] or v == "") or name not in omitted
        }

    return decode, encode


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _leaf_codec(tp: Any) -> tuple[Decode, Encode] | None:
    """The codec of a type that holds no other annotated type, or None."""
    if tp is Any:
        return (lambda value, path: value), _same
    if tp in (str, int, float, bool):
        return _scalar(tp)
    if tp is Layer:
        return _layer()
    if typing.get_origin(tp) is Literal:
        return _literal(typing.get_args(tp))
    return None


def _codec(tp: Any) -> tuple[Decode, Encode]:
    if tp in _CODECS:
        return _CODECS[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    codec = _leaf_codec(tp)
    if codec is not None:
        pass
    elif origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        codec = _optional(_codec(inner), _type_name(inner))
    elif origin is list:
        codec = _list(args[0])
    elif origin is dict and args[0] is str:
        codec = _dict(args[1])
    elif origin is dict and args[0] is Layer:
        codec = _layer_keyed(args[1])
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        codec = _record(tp)
    else:
        raise TypeError(f"no JSON codec for {tp!r}")
    _CODECS[tp] = codec
    return codec
