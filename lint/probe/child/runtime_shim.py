"""Make vLLM's CUDA build construct models on meta tensors on a machine with no GPU.

Only ever imported inside the probe child process: everything here patches global state
(import machinery, torch.ops, torch.cuda, vLLM's platform) and must not leak into the CLI.
Each step mirrors one item of shared/notes/meta-probe.md; the order matters, because
vLLM reads `current_platform` and calls some ops while its modules import.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import re
import sys
import types
from typing import Any

# Native extensions of the CUDA wheel that cannot load here (no libcuda, or AVX-512
# instructions). They are replaced by inert stub packages before anything imports them.
NATIVE_MODULES = (
    "vllm._C",
    "vllm._C_stable_libtorch",
    "vllm._moe_C",
    "vllm._moe_C_stable_libtorch",
    "vllm._flashmla_C",
    "vllm._flashmla_extension_C",
    "vllm._qutlass_C",
    "vllm._deepselect_C",
    "vllm._flashkda_C",
    "vllm._rocm_C",
    "vllm.cumem_allocator",
    "vllm.vllm_flash_attn._vllm_fa2_C",
    "vllm.vllm_flash_attn._vllm_fa3_C",
    "vllm.third_party.deep_gemm._C",
    # JIT kernel DSLs: vLLM binds them at import but only compiles kernels at first forward.
    "tilelang",
    "cutlass",
    "cuda",
    "quack",
    # Kernel packages older vLLM releases import at module level on CUDA (0.23: humming-kernels).
    "humming",
)

# Stubbed only after transformers has recorded that they are unavailable, so its
# availability checks stay truthful while an unguarded import still succeeds: PyPI's
# torchvision does not load beside torch 2.13 CPU, and multimodal classes (Qwen3.5)
# import its transforms for image preprocessing the probe never runs.
LATE_STUBS = ("torchvision",)

# torch.ops namespaces that vLLM's native extensions would have registered.
OP_NAMESPACES = (
    "_C",
    "_C_cache_ops",
    "_C_custom_ar",
    "_moe_C",
    "_rocm_C",
    "_qutlass_C",
    "_flashmla_C",
    "_flashmla_extension_C",
    "_vllm_fa2_C",
    "_vllm_fa3_C",
    "_deepselect_C",
    "_flashkda_C",
    "_C_utils",
)


# Native capability predicates (`cutlass_scaled_mm_supports_block_fp8`, `cutlass_group_gemm_supported`,
# `is_onednn_acl_supported`): vLLM calls some while its modules import and keeps the answer as a
# plain bool, even as a default argument whose type torch's custom-op schema inference checks
# (0.10-0.11: `apply_w8a8_block_fp8_linear(..., cutlass_block_fp8_supported=CUTLASS_BLOCK_FP8_SUPPORTED)`).
CAPABILITY_QUERY = re.compile(r"^is_|_supports?_|_supported$")


def _unsupported(*args: Any, **kwargs: Any) -> bool:
    """A native capability predicate's answer: a real False (where the generic stub answered a
    falsy `_Inert`, every truth test reads the same), which keeps vLLM on its portable paths."""
    return False


class _Inert:
    """Stands for any native function, class or constant: callable, indexable, falsy-free."""

    def __init__(self, name: str):
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        # Also used as a decorator factory (`@tilelang.jit(...)`), so it returns another
        # stub rather than a plain value.
        return _Inert(f"{self._name}()")

    def __bool__(self) -> bool:
        # Capability queries (`cutlass_scaled_mm_supports_block_fp8(cap)`) run at import;
        # answering "no" keeps vLLM on its portable paths without pretending support.
        return False

    def __getattr__(self, item: str) -> _Inert:
        if item.startswith("__"):
            raise AttributeError(item)
        return _Inert(f"{self._name}.{item}")

    def __iter__(self) -> Any:
        return iter(())

    def __getitem__(self, item: Any) -> _Inert:
        return self

    def __repr__(self) -> str:
        return f"<mtplint stub {self._name}>"


class _StubMeta(type):
    def __getattr__(cls, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        return _Inert(f"{cls.__name__}.{item}")

    def __getitem__(cls, item: Any) -> Any:
        return cls


class _StubType(metaclass=_StubMeta):
    """Base of stand-in native classes: constructible with anything, inert when used."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        return _Inert(f"{type(self).__name__}.{item}")

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return _Inert(f"{type(self).__name__}()")


class _StubModule(types.ModuleType):
    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        if item[:1].isupper():
            # Type names (`cuda.bindings.driver.CUstream`) are used in isinstance() checks
            # by other libraries, so they must be real (empty) classes.
            cls = _StubMeta(item, (_StubType,), {"__module__": self.__name__})
            setattr(self, item, cls)
            return cls
        # Lower-case names may be submodules (`from cuda.bindings import driver`) or
        # functions; a child stub that is both importable-looking and callable serves both.
        child = _StubModule(f"{self.__name__}.{item}")
        child.__path__ = []
        setattr(self, item, child)
        return child

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return _Inert(f"{self.__name__}()")

    def __bool__(self) -> bool:
        return False


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        mod = _StubModule(spec.name)
        mod.__path__ = []  # a package, so submodules (deep_gemm._C.*) resolve to stubs too
        # The marker goes in this module's own dict: declared on _StubModule, child stubs would carry it too.
        vars(mod)["__mtplint_stub__"] = True
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _BuildOutputLoader(_StubLoader):
    """A Python package a wheel ships and a source tree lacks: vLLM logs its __file__."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        mod = super().create_module(spec)
        mod.__file__ = f"<mtplint stub of {spec.name}>"
        return mod


class _NativeStubFinder(importlib.abc.MetaPathFinder):
    def __init__(self, names: tuple[str, ...] = NATIVE_MODULES, loader: type[_StubLoader] = _StubLoader):
        self.names = names
        self.loader = loader

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        for native in self.names:
            if fullname == native or fullname.startswith(native + "."):
                return importlib.machinery.ModuleSpec(fullname, self.loader(), is_package=True)
        return None


def install_native_stubs() -> None:
    if not any(isinstance(f, _NativeStubFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _NativeStubFinder())
        # Build outputs a vLLM source tree lacks (vllm_flash_attn, vendored kernel packages),
        # named by its environment (lint/envs/source.py): last on the path, so they are stubs
        # only where the tree has no such package.
        missing = tuple(m for m in os.environ.get("MTPLINT_STUB_MISSING", "").split(",") if m)
        if missing:
            sys.meta_path.append(_NativeStubFinder(missing, _BuildOutputLoader))


def install_late_stubs() -> None:
    import transformers.utils.import_utils  # noqa: F401  (records what is really installed)

    if not any(isinstance(f, _NativeStubFinder) and f.names == LATE_STUBS for f in sys.meta_path):
        sys.meta_path.insert(0, _NativeStubFinder(LATE_STUBS))


def install_op_fallbacks() -> None:
    import torch
    import torch._ops

    original = torch._ops._OpNamespace.__getattr__

    def getattr_with_fallback(self: Any, op_name: str) -> Any:
        try:
            return original(self, op_name)
        except (AttributeError, RuntimeError):
            if self.name in OP_NAMESPACES and not op_name.startswith("__"):
                if CAPABILITY_QUERY.search(op_name):
                    return _unsupported
                return _Inert(f"torch.ops.{self.name}.{op_name}")
            raise

    torch._ops._OpNamespace.__getattr__ = getattr_with_fallback  # type: ignore[method-assign]  # the fallback is the point

    real_register_fake = torch.library.register_fake

    def tolerant_register_fake(op: Any, *args: Any, **kwargs: Any) -> Any:
        # The op may never have been defined (its extension is a stub): keep the
        # decorator usable either way, whether it is called with the function or later.
        fn = args[0] if args and callable(args[0]) else None
        try:
            registered = real_register_fake(op, *args, **kwargs)
        except Exception:
            return fn if fn is not None else (lambda f: f)
        if fn is not None:
            return registered

        def decorator(f: Any) -> Any:
            try:
                return registered(f)
            except Exception:
                return f

        return decorator

    torch.library.register_fake = tolerant_register_fake


class _InertStream:
    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def __enter__(self) -> _InertStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        return lambda *a, **k: None


def install_cuda_inert_objects() -> None:
    import torch

    torch.cuda.Stream = _InertStream  # type: ignore[misc,assignment]
    torch.cuda.Event = _InertStream  # type: ignore[misc,assignment]
    torch.cuda.current_stream = lambda *a, **k: _InertStream()  # type: ignore[assignment]
    torch.cuda.stream = lambda *a, **k: _InertStream()  # type: ignore[assignment]
    torch.cuda.set_device = lambda *a, **k: None
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.empty_cache = lambda *a, **k: None
    if hasattr(torch, "accelerator"):  # the device-generic spelling (vLLM's workspace manager)
        torch.accelerator.empty_cache = lambda *a, **k: None
    # A CUDA graph memory pool id (a pair of ints): 0.10.1 asks for the platform's global pool
    # while it builds a model (the CPU build's torch._C._graph_pool_handle is a dummy that raises).
    torch.cuda.graph_pool_handle = lambda: (0, 0)  # type: ignore[assignment,return-value]  # a plain pair stands in
    # Some layers allocate on `current_platform.current_device()`; the meta mode then
    # moves the allocation to meta, so any device index will do.
    torch.cuda.current_device = lambda: 0
    if hasattr(torch, "accelerator"):  # the device-generic spelling (vLLM 0.33.0's Step5 sparse attention)
        torch.accelerator.current_device_index = lambda: 0
    install_meta_stays_on_meta()


def install_meta_stays_on_meta() -> None:
    """A checkpoint tensor (meta here) moved to the GPU by a weight loader stays meta, its dtype
    conversion kept: the CPU build of torch refuses any move to "cuda" ("Torch not compiled with
    CUDA enabled"), which is the probe's machine, not the checkpoint. vLLM 0.33.0's
    moe_wna16_weight_loader does `loaded_weight.to(get_tp_group().device)` outside the meta mode
    (AWQ/GPTQ MoE experts on ROCm, where AWQ is not Marlin)."""
    import torch

    to = torch.Tensor.to
    if getattr(to, "_mtplint_meta_stays", False):
        return

    def meta_to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.is_meta and _to_gpu(args, kwargs):
            dtype = kwargs.get("dtype") or next((a for a in args if isinstance(a, torch.dtype)), None)
            return self if dtype is None else to(self, dtype=dtype)
        return to(self, *args, **kwargs)

    meta_to._mtplint_meta_stays = True  # type: ignore[attr-defined]
    torch.Tensor.to = meta_to  # type: ignore[method-assign]


def _to_gpu(args: tuple, kwargs: dict) -> bool:
    import torch

    for target in (*args[:1], kwargs.get("device")):
        if isinstance(target, str) and target.split(":")[0] == "cuda":
            return True
        if isinstance(target, torch.device) and target.type == "cuda":
            return True
    return False


def install_platform(sm: tuple[int, int], device_name: str, total_memory: int, device_count: int = 8) -> Any:
    """Stand a CUDA platform with the requested compute capability in for the real one."""
    import vllm.platforms as platforms
    import vllm.platforms.cuda as cuda_platform
    from vllm.platforms.cuda import NonNvmlCudaPlatform
    from vllm.platforms.interface import DeviceCapability

    class ProbedCudaPlatform(NonNvmlCudaPlatform):
        # vLLM caches the real one (lru_cache); a constant answer needs no cache.
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:  # type: ignore[override]
            return DeviceCapability(major=sm[0], minor=sm[1])

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return device_name

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return total_memory

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            # As many GPUs as the requested TP x PP: the node size is not a lint input.
            return device_count

        @classmethod
        def is_integrated_gpu(cls, device_id: int = 0) -> bool:
            return False

        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return 132

    platform = ProbedCudaPlatform()
    # 0.10-0.11 also ask the class by its module-level name (FlashMLA's backend:
    # `CudaPlatform.has_device_capability(100)`), which is read at import time, after this.
    cuda_platform.CudaPlatform = ProbedCudaPlatform  # the probed GPU, under vLLM's own name
    platforms._current_platform = platform  # type: ignore[assignment]  # vLLM's lazy slot, typed as its initial None
    return platform


# Compute units per AMD architecture (amdsmi / `multi_processor_count` on the GPU box): MI300X
# and MI325X have 304, MI355X 256. Only sizes kernels' grids; no vLLM decision the probe reads.
_ROCM_COMPUTE_UNITS = {"gfx942": 304, "gfx950": 256}


def install_rocm_platform(
    arch: str, sm: tuple[int, int], device_name: str, total_memory: int, device_count: int = 8
) -> Any:
    """Stand vLLM's own ROCm platform in for the real one, on an AMD GPU of architecture `arch`.

    Only the device queries are answered here: what amdsmi and the HIP build of torch would
    report (the gfx arch, name, memory, topology). Every decision (attention backends, FP8
    flavour, quantization methods, the `on_gfx9()`/`on_mi3xx()` gates) is RocmPlatform's own.
    The arch is read once when vllm.platforms.rocm is imported (`_GCN_ARCH`: amdsmi first, then
    `torch.cuda.get_device_properties("cuda").gcnArchName`), so the torch query is answered first.
    amdsmi is absent here (a ROCm-only package): vLLM logs it and falls back to torch, as on a box
    without it. `torch.version.hip` is left None: vLLM 0.33.0 reads it only to set NCCL_RAS_ENABLE.
    """
    _AITER_ASKED[0] = _switch_off_absent_aiter()
    units = _ROCM_COMPUTE_UNITS.get(arch, 304)
    _answer_hip_torch(arch, sm, device_name, total_memory, units)

    # ROCm's device visibility variable, as the child's CUDA_VISIBLE_DEVICES (empty: no GPU here).
    # vLLM's Triton check reads it on ROCm: empty is its "devices not visible yet" case, which
    # keeps Triton's language module (the CUDA probe's path); unset, it would swap in a
    # placeholder whose missing dtypes fail kernel modules at import.
    os.environ.setdefault("HIP_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", ""))

    import vllm.platforms as platforms
    import vllm.platforms.rocm as rocm_platform

    class ProbedRocmPlatform(rocm_platform.RocmPlatform):
        # amdsmi's answers (the real methods open an amdsmi context: absent here).
        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return device_name

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return total_memory

        @classmethod
        def get_device_uuid(cls, device_id: int = 0) -> str:
            return f"GPU-{device_id:08d}"

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            return True  # XGMI between every pair on an 8-GPU Instinct node

        @classmethod
        def get_all_device_numa_nodes(cls) -> list[int] | None:
            return None

        @classmethod
        def device_count(cls) -> int:
            return device_count

        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return units

        @classmethod
        def get_mla_prefill_backend_cls(cls, mla_selector_config: Any) -> Any:
            return _rocm_mla_prefill_backend(super().get_mla_prefill_backend_cls, mla_selector_config, device_name)

        @classmethod
        def check_and_update_config(cls, vllm_config: Any) -> None:
            _rocm_aiter_requested(device_name)
            super().check_and_update_config(vllm_config)

    platform = ProbedRocmPlatform()
    rocm_platform.RocmPlatform = ProbedRocmPlatform  # type: ignore[misc]  # the probed GPU, under vLLM's own name
    platforms._current_platform = platform  # type: ignore[assignment]  # vLLM's lazy slot, typed as its initial None
    return platform


def _answer_hip_torch(arch: str, sm: tuple[int, int], device_name: str, total_memory: int, units: int) -> None:
    """The device queries a HIP build of torch answers (the gfx arch first: vLLM reads it at import)."""
    import types as _types

    import torch

    properties = _types.SimpleNamespace(
        gcnArchName=arch,
        name=device_name,
        total_memory=total_memory,
        major=sm[0],
        minor=sm[1],
        multi_processor_count=units,
        is_integrated=False,
    )
    torch.cuda.get_device_properties = lambda *a, **k: properties  # type: ignore[assignment]
    torch.cuda.get_device_capability = lambda *a, **k: sm
    torch.cuda.get_device_name = lambda *a, **k: device_name


_FLASH_ATTN_PREFILL = "vllm.v1.attention.backends.mla.prefill.flash_attn"
# The switch was on when this process imported vLLM (a probe worker: every request it serves
# carries the same VLLM_* variables, its key includes them).
_AITER_ASKED = [False]


def _switch_off_absent_aiter() -> bool:
    """VLLM_ROCM_USE_AITER=1 without aiter: vLLM would pick AITER kernels and then refuse them
    ("AITER MoE is not enabled"), a failure of this machine; the deploy box has aiter. The run
    without AITER is replayed instead: the switch is turned off before vLLM reads it (at import,
    and again per probe: a probe worker hands each request the caller's environment). True
    where it was asked for."""
    import importlib.util

    if os.environ.get("VLLM_ROCM_USE_AITER", "").lower() not in ("1", "true"):
        return False
    if importlib.util.find_spec("aiter") is not None:
        return False
    os.environ["VLLM_ROCM_USE_AITER"] = "0"
    return True


def _rocm_mla_prefill_backend(select: Any, mla_selector_config: Any, device_name: str) -> Any:
    """vLLM's own MLA prefill choice on ROCm. Its FLASH_ATTN backend calls the ROCm build of
    flash-attn (vLLM's ROCm images ship it), absent here, so vLLM refuses every backend with
    "required dependencies not available". Then only that package query is answered "installed"
    and vLLM chooses again: its checks of the MLA dimensions, dtype and GPU still decide, and the
    step is reported as not checked (MTP025)."""
    try:
        return select(mla_selector_config)
    except ValueError as exc:
        if "required dependencies not available" not in str(exc):
            raise
    import importlib

    from . import unchecked_steps

    module: Any = importlib.import_module(_FLASH_ATTN_PREFILL)
    query = module.is_flash_attn_varlen_func_available
    module.is_flash_attn_varlen_func_available = lambda: True
    try:
        chosen = select(mla_selector_config)
    finally:
        module.is_flash_attn_varlen_func_available = query
    if getattr(module, "flash_attn_varlen_func", False) is None:
        # The kernel the backend binds when it is built: vLLM's own ROCm stand-in for the
        # absent package (fa_utils: raises ImportError if called), never called here.
        module.flash_attn_varlen_func = importlib.import_module(
            "vllm.v1.attention.backends.fa_utils"
        ).flash_attn_varlen_func
    unchecked_steps.record(
        f"the MLA prefill backend {chosen.get_name()} (its flash-attn kernels)",
        f"ROCm ({device_name})",
        "the probe's environment lacks flash-attn (its ROCm build), a ROCm-only package; vLLM chose the "
        "backend as if it were installed",
        "flash-attn",
    )
    return chosen


def _rocm_aiter_requested(device_name: str) -> None:
    """VLLM_ROCM_USE_AITER=1 (vLLM's DeepSeek recipe for AMD exports it) asks vLLM for AITER's
    kernels; without the aiter package the probe replays the run without them (the switch was
    turned off at install). Said at each probe, so the lint does not claim the AITER paths."""
    if _switch_off_absent_aiter() or _AITER_ASKED[0]:
        from . import unchecked_steps

        unchecked_steps.record(
            "the AITER kernels it selects (ROCM_AITER_MLA and AITER attention, AITER fused MoE, FP8 GEMMs)",
            f"VLLM_ROCM_USE_AITER=1 on ROCm ({device_name})",
            "the probe's environment lacks aiter, a ROCm-only package; vLLM's choices without AITER were "
            "replayed instead",
            "aiter",
        )


def meta_device_mode() -> Any:
    """A TorchFunctionMode forcing every tensor factory onto the meta device.

    `torch.device("meta")` as a context is not enough: several vLLM modules allocate with
    an explicit `device="cuda"`, and buffers are moved with `.to()/.cuda()/.pin_memory()`.
    """
    import torch
    from torch.overrides import TorchFunctionMode

    factories = {
        torch.empty,
        torch.zeros,
        torch.ones,
        torch.full,
        torch.arange,
        torch.rand,
        torch.randn,
        torch.randint,
        torch.tensor,
        torch.empty_strided,
        torch.eye,
        torch.linspace,
        torch.as_tensor,
        torch.zeros_like,
        torch.ones_like,
        torch.empty_like,
        torch.full_like,
        torch.rand_like,
        torch.randn_like,
    }
    moves = {torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.pin_memory}
    meta = torch.device("meta")

    class MetaMode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = dict(kwargs or {})
            if _index_data[0]:
                return func(*args, **kwargs)
            if func in factories and _cpu_codes and sys._getframe(1).f_code in _cpu_codes:
                return func(*args, **kwargs)
            if func in factories:
                if func is torch.tensor or func is torch.as_tensor:
                    kwargs["device"] = meta
                else:
                    kwargs["device"] = meta
                kwargs.pop("pin_memory", None)
                return func(*args, **kwargs)
            if func in moves and args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
                if func is torch.Tensor.to:
                    # keep dtype conversions, drop device moves
                    dtype = kwargs.get("dtype")
                    for a in args[1:]:
                        if isinstance(a, torch.dtype):
                            dtype = a
                    return args[0] if dtype is None else torch.Tensor.to(args[0], dtype=dtype)
                return args[0]
            return func(*args, **kwargs)

    return MetaMode()


# Depth of `computed_on_cpu` calls: while positive the meta mode lets tensors be real.
_index_data = [0]

# vLLM functions that compute small index tensors from the parallel layout alone, which later
# code reads as data (`.item()`, `torch.nonzero`): EP's expert map, its mask and routing tables
# (vLLM 0.33.0 ExpertMapManager: "device if device.type != 'meta' else cpu", its own answer to
# a meta default device). (module, qualified name) per release line.
INDEX_DATA_FUNCTIONS = (
    ("vllm.model_executor.layers.fused_moe.expert_map_manager", "ExpertMapManager._calculate_expert_maps"),
    ("vllm.model_executor.layers.fused_moe.expert_map_manager", "ExpertMapManager._init_routing_tables"),
    # Releases before ExpertMapManager (0.10-0.2x) build the map in FusedMoE.__init__.
    ("vllm.model_executor.layers.fused_moe.layer", "determine_expert_map"),
)


# Functions whose own allocations are real, wherever they were imported under their name:
# topology queries that run a collective over the probe's one-process group and read the
# answer (vLLM 0.33.0 `in_the_same_node_as`, asked by decode context parallelism's attention).
INDEX_DATA_CALLERS = (("vllm.distributed.parallel_state", "in_the_same_node_as"),)
_cpu_codes: set[Any] = set()


def computed_on_cpu(fn: Any) -> Any:
    """`fn` with the meta mode suspended: what it allocates is real CPU data (a few integers
    per expert), so the code that reads it as data runs as on a GPU box. Weights stay meta."""
    import functools

    if getattr(fn, "_mtplint_on_cpu", False):
        return fn

    @functools.wraps(fn)
    def on_cpu(*args: Any, **kwargs: Any) -> Any:
        _index_data[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _index_data[0] -= 1

    on_cpu._mtplint_on_cpu = True  # type: ignore[attr-defined]
    return on_cpu


def install_index_data() -> None:
    """Wrap INDEX_DATA_FUNCTIONS where this release has them, before a model is built (their
    modules are imported here; a module-level function is looked up by name when called)."""
    import importlib

    for module_name, qualname in INDEX_DATA_FUNCTIONS:
        try:
            module = importlib.import_module(module_name)
        except Exception:
            continue
        owner: Any = module
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        fn = getattr(owner, name, None) if owner is not None else None
        if fn is None or not callable(fn):
            continue
        setattr(owner, name, computed_on_cpu(fn))
    for module_name, name in INDEX_DATA_CALLERS:
        try:
            fn = getattr(importlib.import_module(module_name), name, None)
        except Exception:
            continue
        code = getattr(fn, "__code__", None)
        if code is not None:
            _cpu_codes.add(code)


# Kernel workspaces vLLM builds while it constructs a model (they hold no weights) from a GPU-only
# package the probe's interpreter lacks: module, the function that builds it, the package, what
# in the checkpoint asks for it. vLLM 0.33.0's Step5 sparse attention makes its FlashInfer adapter
# in __init__ (sparse_attention.py:339).
INERT_KERNEL_WORKSPACES = (
    ("vllm.models.step5.nvidia.sparse_attention", "_shared_adapter", "flashinfer", "the config's sparse_config"),
)


class _InertWorkspaceLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, name: str, package: str, flag: str):
        self.loader, self.name, self.package, self.flag = loader, name, package, flag

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        name, package, flag = self.name, self.package, self.flag

        def inert_workspace(*args: Any, **kwargs: Any) -> _Inert:
            from . import unchecked_steps

            unchecked_steps.record(
                f"the {package} kernel workspace {module.__name__}.{name} builds",
                flag,
                f"the probe's environment lacks {package}, a GPU-only package; the model was built without "
                "that workspace (it holds no weights)",
                package,
            )
            return _Inert(name)

        setattr(module, name, inert_workspace)


class _InertWorkspaceFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        import importlib.util

        for module_name, name, package, flag in INERT_KERNEL_WORKSPACES:
            if fullname != module_name or importlib.util.find_spec(package) is not None:
                continue
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = _InertWorkspaceLoader(spec.loader, name, package, flag)
                    return spec
        return None


def install_inert_kernel_workspaces() -> None:
    if not any(isinstance(f, _InertWorkspaceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _InertWorkspaceFinder())


def install_inprocess_registry_inspection() -> None:
    """vLLM inspects model classes in a child process "to avoid initializing CUDA"; that
    child would not inherit these patches, and there is no CUDA to protect here."""
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()


def install(sm: tuple[int, int], device_name: str, total_memory: int, device_count: int = 8, arch: str = "") -> None:
    """arch: an AMD GPU's gfx architecture (vLLM's ROCm platform); empty: an NVIDIA GPU (CUDA)."""
    install_native_stubs()
    install_op_fallbacks()
    install_cuda_inert_objects()
    if arch:
        install_rocm_platform(arch, sm, device_name, total_memory, device_count)
    else:
        install_platform(sm, device_name, total_memory, device_count)
    install_inprocess_registry_inspection()
    install_inert_kernel_workspaces()
    install_late_stubs()
