"""Which runtime construction prefixes does each exclusion entry actually exclude?

Answered by vLLM's own quant config: for every layer recorded at construction, the
config's get_quant_method() is asked again with its exclusion list narrowed to one entry.
That is the format's real matcher (compressed-tensors `re:` with re.match, ModelOpt
substring + fnmatch, fp8 exact, GPTQ `-:` dynamic...), packed-module mapping included.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..report import ExclusionSection, Layer, Model

# The attribute each quant config keeps its exclusion list in.
EXCLUSION_ATTRS = ("ignore", "exclude_modules", "ignored_layers", "modules_to_not_convert", "dynamic", "extra_config")


# Configs that keep their exclusion list as a key of a dict of their own: (the attribute
# holding the dict, the key). QuarkConfig keeps config.json's quantization_config as
# `quant_config` and reads `quant_config["exclude"]` in get_quant_method_target (vLLM 0.33.0
# quark/quark.py), after apply_vllm_mapper rewrote that dict into the runtime namespace.
HELD_IN_DICT = (("quant_config", "exclude"),)


def exclusion_attr(quant_config: Any) -> str | None:
    for attr in EXCLUSION_ATTRS:
        value = getattr(quant_config, attr, None)
        if isinstance(value, (list, dict)):
            return attr
    for _attr, key in HELD_IN_DICT:
        held = _holder(quant_config, key)
        if held is not None and isinstance(held.get(key), list):
            return key
    return None


def _holder(quant_config: Any, attr: str) -> dict | None:
    """The dict an exclusion list named `attr` is kept in, where the config keeps it in one."""
    for holder, key in HELD_IN_DICT:
        held = getattr(quant_config, holder, None)
        if key == attr and isinstance(held, dict) and not hasattr(type(quant_config), attr):
            return held
    return None


def exclusion_list(quant_config: Any, attr: str) -> Any:
    held = _holder(quant_config, attr)
    return held.get(attr) if held is not None else getattr(quant_config, attr)


def _is_unquantized(method: Any) -> bool:
    return method is None or type(method).__name__.startswith("Unquantized")


@contextlib.contextmanager
def _narrowed(quant_config: Any, attr: str, value: Any):
    held = _holder(quant_config, attr)
    saved = exclusion_list(quant_config, attr)
    if held is not None:
        held[attr] = value
    else:
        setattr(quant_config, attr, value)
    try:
        yield
    finally:
        if held is not None:
            held[attr] = saved
        else:
            setattr(quant_config, attr, saved)


def _excluded(
    quant_config: Any, get_quant_method: Any, layer: Any, prefix: str, raised: list[str] | None = None
) -> bool | None:
    saved_scheme = getattr(layer, "scheme", None)
    try:
        return _is_unquantized(get_quant_method(layer, prefix))
    except Exception as exc:
        if raised is not None:
            raised.append(str(exc)[:300])
        return None  # the config cannot decide for this layer with this list
    finally:
        if saved_scheme is not None:
            with contextlib.suppress(Exception):
                layer.scheme = saved_scheme


# The functions vLLM's quant configs call by their module-global name to compare a layer
# name with the exclusion list (first argument: the name compared), and the config methods
# that do the same. A layer's decision may compare names other than its prefix:
# compressed-tensors decides a FusedMoE from `{prefix}.0.{gate,up,down}_proj`
# (CompressedTensorsMoEMethod.get_moe_method, vLLM 0.33.0).
COMPARING_FUNCTIONS = ("should_ignore_layer", "is_layer_skipped")
COMPARING_METHODS = ("is_layer_excluded",)
_QUANT_PACKAGE = "vllm.model_executor.layers.quantization"


class ComparedNames:
    """Records the names a quant config's own matcher is called with while one
    get_quant_method decision runs (`during`); outside a decision the matchers run as
    they are."""

    def __init__(self) -> None:
        self._stack: list[list[str]] = []
        self._restore: list[tuple[dict[str, Any], str, Any]] = []

    def _spy(self, real: Any) -> Any:
        import functools

        @functools.wraps(real)
        def spy(*args: Any, **kwargs: Any) -> Any:
            if self._stack:
                name = args[0] if args else kwargs.get("layer_name", kwargs.get("prefix"))
                if isinstance(name, str) and name not in self._stack[-1]:
                    self._stack[-1].append(name)
            return real(*args, **kwargs)

        spy._mtplint_spy = True  # type: ignore[attr-defined]
        return spy

    def install(self, quant_config: Any) -> None:
        import sys

        for modname, mod in list(sys.modules.items()):
            if not modname.startswith(_QUANT_PACKAGE) or mod is None:
                continue
            g = vars(mod)
            for fname in COMPARING_FUNCTIONS:
                real = g.get(fname)
                if callable(real) and not getattr(real, "_mtplint_spy", False):
                    self._restore.append((g, fname, real))
                    g[fname] = self._spy(real)
        for mname in COMPARING_METHODS:
            bound = getattr(quant_config, mname, None)
            if callable(bound) and not getattr(bound, "_mtplint_spy", False):
                self._restore.append((quant_config.__dict__, mname, quant_config.__dict__.get(mname)))
                setattr(quant_config, mname, self._spy(bound))

    def uninstall(self) -> None:
        for g, name, real in reversed(self._restore):
            if real is None:
                g.pop(name, None)
            else:
                g[name] = real
        self._restore.clear()

    @contextlib.contextmanager
    def during(self):
        names: list[str] = []
        self._stack.append(names)
        try:
            yield names
        finally:
            self._stack.pop()


def direct_matcher(quant_config: Any, attr: str, layers: list[tuple[Model, str, Any]] | None = None) -> Any:
    """The format's own name matcher, called with one entry: (entry, prefix) -> bool.

    Preferred over re-asking get_quant_method because it also answers for layers that
    would be unquantized anyway (an `lm_head` entry does match the `lm_head` prefix).
    `layers` (model, prefix, layer object): for a matcher whose answer depends on the
    layer's class (Quark's routed experts).
    """
    fused = getattr(quant_config, "packed_modules_mapping", {}) or {}
    for own in (_quark_matcher, _inc_matcher):
        matcher = own(quant_config, attr, fused, layers or [])
        if matcher is not None:
            return matcher
    for matcher_of in (_compressed_tensors_matcher, _modelopt_matcher, _skip_list_matcher, _gptq_dynamic_matcher):
        matcher = matcher_of(quant_config, attr, fused)
        if matcher is not None:
            return matcher
    return None


def _quark_matcher(quant_config: Any, attr: str, fused: Any, layers: list[tuple[Model, str, Any]]) -> Any:
    """Quark's skip test (quark/utils.py should_ignore_layer, vLLM 0.33.0): `re:` with
    re.match, else exact or fnmatch, a fused layer excluded when all its shards are; and for
    routed experts (`check_children`, the class test get_quant_method_target makes with
    its own RoutedExperts) an entry naming the layer or any child of it (`...experts.7.up_proj`)
    excludes the whole MoE. Releases whose helper has no `check_children` are asked without it."""
    if attr != "exclude" or _holder(quant_config, attr) is None:
        return None
    import inspect
    import sys

    module = sys.modules.get(type(quant_config).__module__)
    should_ignore = getattr(module, "should_ignore_layer", None) or _vllm_function(
        "vllm.model_executor.layers.quantization.quark.utils", "should_ignore_layer"
    )
    should_ignore = getattr(should_ignore, "__wrapped__", should_ignore)  # ComparedNames' spy
    if should_ignore is None:
        return None
    try:
        by_class = "check_children" in inspect.signature(should_ignore).parameters
    except (TypeError, ValueError):
        by_class = False
    routed_cls = getattr(module, "RoutedExperts", None)
    routed = {
        prefix
        for _m, prefix, layer in layers
        if by_class and isinstance(routed_cls, type) and isinstance(layer, routed_cls)
    }

    def quark(entry: str, prefix: str) -> bool:
        if by_class:
            return bool(should_ignore(prefix, ignore=[entry], fused_mapping=fused, check_children=prefix in routed))
        return bool(should_ignore(prefix, ignore=[entry], fused_mapping=fused))

    return quark


def _vllm_function(module: str, name: str) -> Any:
    """A function of vLLM's, or None where this release has no such module or name."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name, None)
    except Exception:
        return None


# A bit width no INC scheme uses: an entry narrowed to it governs a layer when vLLM's own
# parser resolves the layer to it.
_INC_PROBE_BITS = 13


def _inc_matcher(quant_config: Any, attr: str, fused: Any, layers: list[tuple[Model, str, Any]]) -> Any:
    """AutoRound/INC `extra_config` (vLLM 0.33.0 inc/config_parser.py INCConfigParser): an entry
    governs a layer when the parser, with the list narrowed to that entry, resolves the layer
    to it (exact name, a short name the layer name ends with, a regex key with re.search, a fused
    layer through its shards, a FusedMoE through keys under it); raising for inconsistent shards
    counts as taking part. Only entries of 16 bits or more exclude (_match_primary).
    get_quant_method's own shortcut for a key spelled `model.{prefix}` is not asked."""
    parser = getattr(quant_config, "config_parser", None)
    resolve = getattr(parser, "resolve", None)
    if attr != "extra_config" or not callable(resolve):
        return None
    layer_of = {prefix: layer for _m, prefix, layer in layers}

    def inc(entry: str, prefix: str) -> bool:
        with _narrowed(quant_config, attr, {entry: {"bits": _INC_PROBE_BITS}}):
            return getattr(resolve(layer_of.get(prefix), prefix), "bits", None) == _INC_PROBE_BITS

    return inc


def _compressed_tensors_matcher(quant_config: Any, attr: str, fused: Any) -> Any:
    if attr != "ignore" or not type(quant_config).__name__.startswith("CompressedTensors"):
        return None
    should_ignore = _vllm_function(
        "vllm.model_executor.layers.quantization.compressed_tensors.utils", "should_ignore_layer"
    )
    if should_ignore is None:
        return None
    return lambda entry, prefix: should_ignore(prefix, ignore=[entry], fused_mapping=fused)


def _modelopt_matcher(quant_config: Any, attr: str, fused: Any) -> Any:
    if attr != "exclude_modules" or not hasattr(quant_config, "is_layer_excluded"):
        return None

    def modelopt(entry: str, prefix: str) -> bool:
        with _narrowed(quant_config, attr, [entry]):
            return bool(quant_config.is_layer_excluded(prefix))

    return modelopt


def _skip_list_matcher(quant_config: Any, attr: str, fused: Any) -> Any:
    if attr not in ("ignored_layers", "modules_to_not_convert"):
        return None
    skipped = _vllm_function("vllm.model_executor.layers.quantization.utils.quant_utils", "is_layer_skipped")
    mode = getattr(quant_config, "ignored_layers_match_mode", None)
    # AWQ matches its list its own way (substring mode, fixed in its get_quant_method; its
    # own helper in older releases): re-asking get_quant_method answers for it.
    if skipped is None or "awq" in type(quant_config).__name__.lower():
        return None
    if mode:
        return lambda entry, prefix: skipped(prefix, [entry], fused, match_mode=mode)
    return lambda entry, prefix: skipped(prefix, [entry], fused)


def _gptq_dynamic_matcher(quant_config: Any, attr: str, fused: Any) -> Any:
    if attr != "dynamic":
        return None
    override = _vllm_function("vllm.model_executor.layers.quantization.utils.gptq_utils", "get_dynamic_override")
    if override is None:
        return None

    def gptq(entry: str, prefix: str) -> bool:
        with _narrowed(quant_config, attr, {entry: quant_config.dynamic[entry]}):
            return override(quant_config, layer_name=prefix) is False

    return gptq


def match_entries(
    quant_config: Any,
    get_quant_method: Any,
    layers: list[tuple[Model, str, Any]],
    consultations: list[dict[str, Any]] | None = None,
    model_of: Any = None,
    compared: dict[tuple[Model, str], list[str]] | None = None,
    undecided: list[tuple[Model, str]] | None = None,
) -> list[ExclusionSection]:
    """layers: (model, prefix, layer object). One section per exclusion list, each entry
    mapped to the layers (model, prefix) it excludes; the usual list first.

    `compared`: (model, prefix) -> the names the format's matcher was called with for that
    decision (ComparedNames); an entry matches the layer when it matches one of them (the
    prefix itself where none was recorded). `undecided`: (model, module) of Linears built
    without asking the config, matched by module path into the section's `undecided`.

    Lists a config reads through a method of its own (CONSULTING_METHODS) are evaluated
    from `consultations` (record_consultations); they replace an empty usual list, or
    follow it."""
    primary = _match_primary(quant_config, get_quant_method, layers, compared or {}, undecided or [])
    extra = match_consulted(consultations or [], model_of)
    if extra and not primary.entries:
        return extra
    return [primary, *extra]


def _match_primary(
    quant_config: Any,
    get_quant_method: Any,
    layers: list[tuple[Model, str, Any]],
    compared: dict[tuple[Model, str], list[str]],
    undecided: list[tuple[Model, str]],
) -> ExclusionSection:
    attr = exclusion_attr(quant_config)
    if attr is None:
        return ExclusionSection(attr=None, matcher=None)
    full = exclusion_list(quant_config, attr)
    entries = list(full.keys()) if isinstance(full, dict) else list(full)
    if attr == "dynamic":
        # Only negative (`-:`) dynamic keys exclude; positive ones override bits.
        entries = [e for e in entries if str(e).startswith("-:")]
    if attr == "extra_config":
        # INC: an override of 16 bits or more keeps the layer unquantized (get_quant_method's
        # test); lower ones only change bits or group size.
        entries = [e for e in entries if isinstance(full[e], dict) and _bits(full[e]) >= 16]
    direct = direct_matcher(quant_config, attr, layers)
    if direct is not None:
        named = [(m, p, compared.get((m, p)) or [p]) for m, p, _layer in layers]
        result, errors = _match_direct(direct, entries, named)
        plain, _ = _match_direct(direct, entries, [(m, p, [p]) for m, p in undecided])
        return ExclusionSection(
            attr=attr,
            matcher="direct",
            entries=result,
            errors=errors,
            undecided={e: hits for e, hits in plain.items() if hits},
        )
    result, errors = _match_by_outcome(quant_config, get_quant_method, attr, full, entries, layers)
    return ExclusionSection(attr=attr, matcher="outcome", entries=result, errors=errors)


def _bits(override: dict) -> int:
    try:
        return int(override.get("bits", 16))
    except (TypeError, ValueError):
        return 0


def _match_direct(
    direct: Any, entries: list[Any], layers: list[tuple[Model, str, list[str]]]
) -> tuple[dict[str, list[Layer]], dict[str, str]]:
    """Each entry's layer matches by the format's own matcher, tried on every name
    vLLM compared for that layer (layers: model, prefix, names), and the entries it raised
    for (counted as matching where it raised)."""
    result: dict[str, list[Layer]] = {}
    errors: dict[str, str] = {}
    for entry in entries:
        hits = []
        for model, prefix, names in layers:
            for name in names:
                try:
                    matched = bool(direct(entry, name))
                except Exception as exc:  # e.g. "different quantization schemes for the shards"
                    errors[str(entry)] = str(exc)[:300]
                    matched = True
                if matched:
                    hits.append(Layer(model, prefix))
                    break
        result[str(entry)] = hits
    return result, errors


def _match_by_outcome(
    quant_config: Any,
    get_quant_method: Any,
    attr: str,
    full: Any,
    entries: list[Any],
    layers: list[tuple[Model, str, Any]],
) -> tuple[dict[str, list[Layer]], dict[str, str]]:
    """Each entry's layer matches where get_quant_method, asked with the list
    (`full`) narrowed to that entry, answers unquantized and with an empty list did not;
    and where it raises narrowed to the entry but not with the empty list: vLLM's skip test
    expands a fused layer into its shards (`qkv_proj` -> `q_proj`, `k_proj`, `v_proj`) and
    refuses a list that names some of them ("Detected some but not all shards"), so an entry
    naming one shard takes part in that layer's decision (with its sibling shards listed too,
    the layer is built unquantized). Also the entries it raised for, as the direct matcher
    reports them."""
    empty: Any = {} if isinstance(full, dict) else []
    baseline: dict[tuple[Model, str], bool | None] = {}
    layers = [t for t in layers if t[2] is not None]  # re-asking needs the layer object
    with _narrowed(quant_config, attr, empty):
        for model, prefix, layer in layers:
            baseline[(model, prefix)] = _excluded(quant_config, get_quant_method, layer, prefix)
    result: dict[str, list[Layer]] = {}
    errors: dict[str, str] = {}
    for entry in entries:
        narrowed = {entry: full[entry]} if isinstance(full, dict) else [entry]
        hits: list[Layer] = []
        with _narrowed(quant_config, attr, narrowed):
            for model, prefix, layer in layers:
                before = baseline[(model, prefix)]
                if before:
                    continue  # unquantized anyway: the entry changes nothing here
                raised: list[str] = []
                now = _excluded(quant_config, get_quant_method, layer, prefix, raised)
                if now or (now is None and before is False):
                    hits.append(Layer(model, prefix))
                    if raised:
                        errors.setdefault(str(entry), raised[0])
        result[str(entry)] = hits
    return result, errors


# Configs that read an exclusion list outside get_quant_method's usual attributes, through a
# method of their own, and only for some layers: (name the config is registered under,
# the method, the attribute it reads the entries from, the quantization_config key they
# come from). DeepseekV4FP8Config (vLLM 0.33.0) keeps ModelOpt's `ignore` in
# `_modelopt_ignore` and reads it only in `_is_nvfp4_expert_layer(prefix)`, to decide
# whether the routed experts at `prefix` are NVFP4 or stay native MXFP4: it maps the
# construction prefix back to the on-disk aggregate (`model.layers.43.ffn.experts` ->
# `mtp.0.ffn.experts`) and fnmatches that one name against the entries.
CONSULTING_METHODS = (("deepseek_v4_fp8", "_is_nvfp4_expert_layer", "_modelopt_ignore", "ignore"),)


class _FnmatchRecorder:
    """Stands in for the `fnmatch` module in a consulting method's globals while vLLM runs
    it: records the name vLLM compares the entries with, and defers to fnmatch."""

    def __init__(self, real: Any, names: list[str]):
        self._real, self._names = real, names

    def __getattr__(self, item: str) -> Any:
        return getattr(self._real, item)

    def fnmatchcase(self, name: str, pat: str) -> bool:
        self._names.append(name)
        return self._real.fnmatchcase(name, pat)

    def fnmatch(self, name: str, pat: str) -> bool:
        self._names.append(name)
        return self._real.fnmatch(name, pat)


@contextlib.contextmanager
def _recording_fnmatch(func: Any, names: list[str]):
    import fnmatch as _fnmatch

    g = getattr(func, "__globals__", {})
    real = g.get("fnmatch")
    if real is not _fnmatch:
        yield False  # this vLLM's method matches some other way: the names stay unknown
        return
    g["fnmatch"] = _FnmatchRecorder(real, names)
    try:
        yield True
    finally:
        g["fnmatch"] = real


@contextlib.contextmanager
def record_consultations():
    """While vLLM constructs the models: record every call of a CONSULTING_METHODS method
    (the config instance, the prefix vLLM passed, the current VllmConfig, and the name the
    entries were compared with). Yields the list the records go to."""
    import functools

    records: list[dict[str, Any]] = []
    restore: list[tuple[type, str, Any]] = []
    try:
        from vllm.config import get_current_vllm_config
        from vllm.model_executor.layers.quantization import get_quantization_config
    except Exception:
        yield records
        return

    def current_config() -> Any:
        try:
            return get_current_vllm_config()
        except Exception:
            return None

    for qname, meth, attr, key in CONSULTING_METHODS:
        try:
            cls = get_quantization_config(qname)
        except Exception:
            continue
        original = getattr(cls, meth, None)
        if not callable(original):
            continue

        @functools.wraps(original)
        def spy(
            self: Any,
            prefix: str,
            *args: Any,
            __orig: Any = original,
            __meth: str = meth,
            __attr: str = attr,
            __key: str = key,
            **kwargs: Any,
        ) -> Any:
            names: list[str] = []
            with _recording_fnmatch(__orig, names) as recorded:
                out = __orig(self, prefix, *args, **kwargs)
            records.append(
                {
                    "config": self,
                    "method": __meth,
                    "attr": __attr,
                    "key": __key,
                    "function": __orig,
                    "prefix": prefix,
                    "vllm_config": current_config(),
                    "compared": names[0] if names else None,
                    "recorded": recorded,
                }
            )
            return out

        restore.append((cls, meth, cls.__dict__.get(meth)))
        setattr(cls, meth, spy)
    try:
        yield records
    finally:
        for cls, meth, before in reversed(restore):
            if before is None:
                delattr(cls, meth)
            else:
                setattr(cls, meth, before)


def match_consulted(records: list[dict[str, Any]], model_of: Any = None) -> list[ExclusionSection]:
    """One exclusions section per consulting method that vLLM called during construction:
    each entry of the list the method reads is evaluated by calling the method itself, with
    the list narrowed to that entry, for every prefix vLLM asked it about, under the
    VllmConfig that was current then. An entry matches a prefix when it changes the
    method's answer there (compared with an empty list). "consulted" maps each
    layer vLLM asked about to the name the entries were compared with."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((id(r["config"]), r["method"]), []).append(r)
    sections = []
    for calls in groups.values():
        section = _consulted_section(calls, model_of)
        if section is not None:
            sections.append(section)
    return sections


def _consulted_section(calls: list[dict[str, Any]], model_of: Any) -> ExclusionSection | None:
    """The section for one config's consulting method (None where its list is empty)."""
    from vllm.config import set_current_vllm_config

    first = calls[0]
    qc, attr, fn = first["config"], first["attr"], first["function"]
    full = getattr(qc, attr, None)
    if not isinstance(full, (list, tuple)) or not full:
        return None
    entries = [e for e in full if isinstance(e, str)]
    asked: dict[tuple[Model, str], dict[str, Any]] = {}
    for r in calls:
        model: Model = model_of(r["prefix"], r["vllm_config"]) if model_of else "target"
        asked.setdefault((model, r["prefix"]), r)
    hits: dict[str, list[Layer]] = {e: [] for e in entries}
    errors: dict[str, str] = {}
    consulted: dict[Layer, str | None] = {}
    for (model, prefix), r in asked.items():
        where = Layer(model, prefix)
        cfg = r["vllm_config"]
        with set_current_vllm_config(cfg) if cfg is not None else contextlib.nullcontext():
            try:
                with _narrowed(qc, attr, type(full)()):
                    baseline = fn(qc, prefix)
            except Exception as exc:
                errors[str(where)] = str(exc)[:300]
                continue
            if r["compared"] is None and r["recorded"]:
                # vLLM compared nothing when it ran with the whole list: the list does not
                # decide this layer (another setting does), whatever its entries say.
                continue
            consulted[where] = r["compared"]
            for entry in entries:
                try:
                    with _narrowed(qc, attr, type(full)([entry])):
                        if fn(qc, prefix) != baseline:
                            hits[entry].append(where)
                except Exception as exc:
                    errors[entry] = str(exc)[:300]
    return ExclusionSection(
        attr=first["key"],
        matcher="direct",
        entries=hits,
        errors=errors,
        config_key=first["key"],
        via=f"{type(qc).__name__}.{first['method']}",
        consulted=consulted,
    )


def filled_by(quant_config: Any, section: ExclusionSection, declared: Any) -> str:
    """ "Class.maybe_update_config" where the config declared no list under the section's key
    and vLLM's start-up filled one from the checkpoint (AWQ: every module stored
    unquantized); "" otherwise."""
    if section.attr is None or not section.entries or not isinstance(declared, dict) or declared.get(section.attr):
        return ""
    if "maybe_update_config" not in vars(type(quant_config)):
        return ""  # the base class's no-op: the list came from elsewhere
    return f"{type(quant_config).__name__}.maybe_update_config"


def as_written(section: ExclusionSection, declared: Any) -> dict[str, str]:
    """The config's own spelling of each entry, where vLLM rewrote the list into its runtime
    namespace first (compressed-tensors `apply_vllm_mapper` with the model's
    hf_to_vllm_mapper): {entry as matched: entry as written}."""
    if not isinstance(declared, dict) or section.attr is None:
        return {}
    written = declared.get(section.attr)
    matched = list(section.entries)
    if not isinstance(written, list) or len(written) != len(matched):
        return {}
    return {m: str(w) for m, w in zip(matched, written, strict=True) if m != str(w)}
