"""The questions checks, the fixer and the reporters ask of one lint's inventory and probe report
(was a model built, its load errors, the module an error belongs to, the decision for a module
path, whether a parameter ends up initialized, the weight-flow graph), each answered once."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from functools import cached_property
from typing import Any

from ..core.findings import Location
from ..inventory.fingerprint import split_module
from ..inventory.model import Inventory, ModuleFormat
from ..inventory.reference import Comparison, compare
from ..probe.report import (
    MODELS,
    Decision,
    ErrorRecord,
    ExclusionSection,
    LoadError,
    LoadResult,
    ParamInfo,
    ProbeReport,
)
from .weight_flow import WeightFlow, build_weight_flow


def is_quantized_method(method: str | None) -> bool:
    return method is not None and not method.startswith("Unquantized")


def frame_json(err: ErrorRecord) -> dict[str, Any] | None:
    """The vLLM frame an error was raised in, as findings' evidence shows it."""
    return dataclasses.asdict(err.frame) if err.frame is not None else None


_MISSING_PARAM = re.compile(r"'([\w.]+)'")
# What vLLM's load errors say about the module a failing tensor was headed for.
_LAYER_NO_PARAM = re.compile(r"Layer (\S+) has no parameter")
_AVAILABLE_IN = re.compile(r"available parameters belonging to ([\w.]+) \((\w+)\)")
_NO_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute")
_NO_MODULE_OR_PARAM = re.compile(r"no module or parameter named '([\w.]+)'")
_NOT_LOADED = LoadResult()  # what a model that was never built loaded: nothing (never mutated)


def _common_prefix_len(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split("."), b.split("."), strict=False):
        if x != y:
            break
        n += 1
    return n


class ReportView:
    def __init__(self, inventory: Inventory, report: ProbeReport, reference: Inventory | None = None):
        self.inventory = inventory
        self.report = report
        # The source checkpoint's inventory (--reference; never probed), else None.
        self.reference = reference
        # Checks ask these once per fed tensor and parameter (hundreds of thousands on a
        # full-size MoE checkpoint): answered once per module path / tensor.
        self._decision_memo: dict[str, dict[str, Decision | None]] = {}
        self._disk_format_memo: dict[str, ModuleFormat | None] = {}
        self._memos: dict[str, Any] = {}

    def memo(self, name: str) -> dict[Any, Any]:
        """A dictionary kept for this lint under `name`: a question asked per tensor or module
        (by this view or by one check) is answered once."""
        found = self._memos.get(name)
        if found is None:
            found = self._memos[name] = {}
        return found

    @property
    def vllm_version(self) -> str:
        return str(self.report.vllm.version)

    @property
    def target_architecture(self) -> str | None:
        """The architecture vLLM built the target as, else the config's first."""
        target = self.report.models.get("target")
        if target is not None and target.architecture:
            return target.architecture
        archs = self.inventory.config.get("architectures")
        return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None

    def built_ok(self, model: str) -> bool:
        """vLLM constructed `model` (and the probe dry-ran its load)."""
        return model in self.report.load

    @property
    def every_model_built(self) -> bool:
        """No config or construction error: both models' prefixes and loads are complete."""
        return self.report.config_error is None and not self.report.construction_errors

    def construction_errors(self) -> list[tuple[str, ErrorRecord]]:
        """(model, error) for each model vLLM failed to build; ("config", error) where its
        config classes refused the inputs."""
        out = list(self.report.construction_errors.items())
        if self.report.config_error is not None:
            out.append(("config", self.report.config_error))
        return out

    def decisions(self, model: str) -> list[Decision]:
        return [d for d in self.report.decisions if d.model == model]

    def params(self, model: str) -> dict[str, ParamInfo]:
        return self.report.params.get(model, {})

    def load(self, model: str) -> LoadResult:
        return self.report.load.get(model, _NOT_LOADED)

    def fed(self, model: str) -> dict[str, list[str]]:
        """Checkpoint tensor -> the parameters of `model` its loading fed."""
        return self.load(model).fed

    def fed_formats(self, model: str) -> list[tuple[str, list[str], ModuleFormat | None]]:
        """(tensor, the parameters it fed, its module's on-disk format) for every tensor the
        loading of `model` fed. Built once: several checks walk every fed tensor."""
        cache = self.memo("fed_formats")
        if model not in cache:
            modules = self.inventory.modules
            rows = []
            for t, params in self.fed(model).items():
                # split_module's answer, without its call for the common case (not an expert block)
                module = t.rpartition(".")[0]
                if not module or module.endswith("experts"):
                    module = split_module(t)[0]
                rows.append((t, params, modules.get(module)))
            cache[model] = rows
        return cache[model]

    def read_tensors(self, model: str) -> frozenset[str]:
        """Checkpoint tensors the loading of `model` consumed: fed to a parameter, or held
        back by a loader until a partner arrived. Built once: checks ask per tensor."""
        cache = self.memo("read_tensors")
        if model not in cache:
            load = self.load(model)
            cache[model] = frozenset(load.fed) | frozenset(load.held_back)
        return cache[model]

    def load_errors(self, model: str | None = None) -> list[tuple[str, LoadError]]:
        """(model, error) for every tensor that failed to load, target first. Built once per
        model (a broken MoE checkpoint has one error per expert tensor): callers only read it."""
        cache = self.memo("load_errors")
        if model not in cache:
            cache[model] = [(m, e) for m in MODELS if model in (None, m) for e in self.load(m).errors]
        return cache[model]

    def exclusion_sections(self) -> list[ExclusionSection]:
        """The quant config's exclusion lists as vLLM matched them, the usual one first."""
        return self.report.exclusions

    def replaced_functions(self) -> set[str]:
        """Functions the runtime patches applied in the probe replaced."""
        return {f for p in self.report.patches for f in p.replaced}

    def _decisions_by_path(self, model: str) -> dict[str, Decision]:
        cache = self.memo("by_path")
        if model not in cache:
            index: dict[str, Decision] = {}
            for d in self.decisions(model):
                index.setdefault(d.module_path, d)
            cache[model] = index
        return cache[model]

    def decision_for_module_path(self, model: str, path: str) -> Decision | None:
        """The construction decision of the module at `path`, or of its closest ancestor."""
        memo = self._decision_memo.get(model)
        if memo is None:
            memo = self._decision_memo[model] = {}
        if path in memo:
            return memo[path]
        index = self._decisions_by_path(model)
        found, ancestor = None, path
        while ancestor:
            if ancestor in index:
                found = index[ancestor]
                break
            ancestor = ancestor.rpartition(".")[0]
        memo[path] = found
        return found

    def module_paths(self, model: str) -> dict[str, list[str]]:
        """Every module path that has parameters below it -> those parameters. Built once:
        a broken load can raise for thousands of tensors, each asking which module it hit."""
        cache = self.memo("module_params")
        if model not in cache:
            index: dict[str, list[str]] = defaultdict(list)
            for p in self.params(model):
                module = p
                while "." in module:
                    module = module.rsplit(".", 1)[0]
                    index[module].append(p)
            cache[model] = dict(index)
        return cache[model]

    def params_under(self, model: str, module: str) -> list[str]:
        """Parameters of `module` and its submodules."""
        return self.module_paths(model).get(module, [])

    def module_of_param(self, model: str, param: str) -> str:
        """The module path owning `param`, even when the param itself does not exist
        (a KeyError names the parameter the loader looked for). Asked once per failing tensor:
        an expert block's thousands of tensors name the same few parameters."""
        memo = self.memo(f"module_of_param:{model}")
        found = memo.get(param)
        if found is None:
            found = memo[param] = self._module_of_param(model, param)
        return found

    def _module_of_param(self, model: str, param: str) -> str:
        index = self.module_paths(model)
        # An inner model's loader (DeepseekV4Model.load_weights) names parameters relative
        # to itself, without the outer `model.`.
        for candidate in (param, f"model.{param}"):
            module = candidate.rsplit(".", 1)[0]
            while module:
                if module in index:
                    return module
                if "." not in module:
                    break
                module = module.rsplit(".", 1)[0]
        return param.rsplit(".", 1)[0]

    def disk_format(self, tensor: str) -> ModuleFormat | None:
        memo = self._disk_format_memo
        if tensor not in memo:
            memo[tensor] = self.inventory.modules.get(split_module(tensor)[0])
        return memo[tensor]

    def tensor_file(self, tensor: str | None) -> str:
        if tensor and tensor in self.inventory.tensors:
            return self.inventory.tensors[tensor].file
        return self.inventory.config_path.name

    def missing_param_in(self, error: ErrorRecord) -> str | None:
        if error.type != "KeyError":
            return None
        memo = self.memo("missing_param_in")  # asked per failing tensor by several checks
        if error.message not in memo:
            m = _MISSING_PARAM.search(error.message)
            memo[error.message] = m.group(1) if m else None
        return memo[error.message]

    def error_module(self, model: str, err: LoadError) -> str | None:
        """The runtime module a failing tensor was headed for, from what vLLM itself said:
        the parameter whose weight loader raised, the parameter a KeyError names, the layer
        prefix or module an error message names, or the module class it names."""
        if err.param:
            return err.param.rsplit(".", 1)[0]
        missing = self.missing_param_in(err)
        if missing:
            return self.module_of_param(model, missing)
        # The message forms are tried in this order; the first that names a module wins.
        for named_in in (
            self._module_of_layer_prefix,
            self._module_named_missing,
            self._module_with_available_params,
            self._module_of_class,
        ):
            module = named_in(model, err.message, err.tensor or "")
            if module is not None:
                return module
        # Shape asserts do not name the parameter; when the checkpoint name is already the
        # runtime module path (most loaders), that module is the one.
        module = (err.tensor or "").rsplit(".", 1)[0]
        if self.params_under(model, module):
            return module
        return None

    def _module_of_layer_prefix(self, model: str, message: str, tensor: str) -> str | None:
        """`Layer <prefix> has no parameter ...`: the module built at that prefix."""
        if m := _LAYER_NO_PARAM.search(message):
            for d in self.decisions(model):
                if d.prefix == m.group(1):
                    return d.module_path
        return None

    def _module_named_missing(self, model: str, message: str, tensor: str) -> str | None:
        """`no module or parameter named '<a.b.c>'`: its module, where the model has one
        (a name of fewer than three parts is too short to place)."""
        if (m := _NO_MODULE_OR_PARAM.search(message)) and m.group(1).count(".") >= 2:
            module = self.module_of_param(model, m.group(1))
            if self.decision_for_module_path(model, module) or self.params_under(model, module):
                return module
        return None

    def _module_with_available_params(self, model: str, message: str, tensor: str) -> str | None:
        """`available parameters belonging to <name> (<class>)`: the module path ending in it."""
        if m := _AVAILABLE_IN.search(message):
            name = m.group(1)
            for d in self.decisions(model):
                if d.module_path == name or d.module_path.endswith("." + name):
                    return d.module_path
        return None

    def _module_of_class(self, model: str, message: str, tensor: str) -> str | None:
        """`'<Class>' object has no attribute`: of the modules of that class, the one whose
        prefix shares the most leading components with the tensor (at least two)."""
        if m := _NO_ATTRIBUTE.search(message):
            same_class = [d for d in self.decisions(model) if d.layer_class == m.group(1)]
            if same_class:
                best = max(same_class, key=lambda d: _common_prefix_len(d.prefix, tensor))
                if _common_prefix_len(best.prefix, tensor) >= 2:
                    return best.module_path
        return None

    def loaded_set(self, model: str) -> set[str]:
        """Parameters of `model` a tensor was loaded into (by a weight loader, or as
        load_weights() reported)."""
        cache = self.memo("loaded_sets")
        if model not in cache:
            load = self.load(model)
            cache[model] = set(load.params_loaded_by_loader) | set(load.loaded_params)
        return cache[model]

    def param_initialized(self, model: str, param: str) -> bool:
        """Fed by a checkpoint tensor, or (draft) shared from a target parameter that was."""
        if model == "draft":
            return self.flow.initialized("draft", param)
        return param in self.loaded_set(model)

    @cached_property
    def ondisk_to_runtime(self) -> list[tuple[str, str, str]]:
        """(on-disk module, model, construction prefix) for every tensor the dry run loaded
        into a runtime module, or failed to load into one: the probe's name mapping."""
        pairs: dict[tuple[str, str, str], None] = {}
        for model in MODELS:
            load = self.load(model)
            prefixes: dict[str, str | None] = {}  # parameter -> its module's construction prefix
            for tensor, params, module_format in self.fed_formats(model):
                ondisk = module_format.module if module_format is not None else split_module(tensor)[0]
                for p in params:
                    prefix = prefixes.get(p, "")
                    if prefix == "":
                        d = self.decision_for_module_path(model, p.rpartition(".")[0])
                        prefix = prefixes[p] = d.prefix if d else None
                    if prefix is not None:
                        pairs[(ondisk, model, prefix)] = None
            for err in load.errors:
                missing = err.tensor and (err.param or self.missing_param_in(err))
                if err.tensor and missing:
                    d = self.decision_for_module_path(model, self.module_of_param(model, missing))
                    if d:
                        pairs[(split_module(err.tensor)[0], model, d.prefix)] = None
        return list(pairs)

    @cached_property
    def reference_comparison(self) -> Comparison | None:
        """The MTP block against the --reference checkpoint's (read once, sampled bytes
        included); None without a reference."""
        if self.reference is None:
            return None
        return compare(self.inventory, self.reference)

    @cached_property
    def flow(self) -> WeightFlow:
        return build_weight_flow(self.report)

    def config_location(self, key: str | None = None) -> Location:
        return Location(file=self.inventory.config_path.name, config_key=key)
