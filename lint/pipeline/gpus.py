"""GPU names users pass (--gpu) mapped to what vLLM sees: the platform (CUDA or ROCm), its
compute capability or gfx architecture, name and memory."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import BadInput


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    sm: tuple[int, int]  # NVIDIA: the compute capability; AMD: HIP's (major, minor) of `arch`
    memory_gib: int
    # AMD: the gfx architecture vLLM's ROCm platform reads (`gcnArchName`); empty: NVIDIA (CUDA).
    arch: str = ""

    @property
    def memory(self) -> int:
        # Nominal: it only sizes caches the probe never builds (not in the probe key); a measured
        # card's torch total is within 1.5% of it (tests/probe/test_gpu_identity.py).
        return self.memory_gib * 2**30

    @property
    def rocm(self) -> bool:
        return bool(self.arch)


GPUS = {
    g.key: g
    for g in (
        Gpu("a100", "NVIDIA A100-SXM4-80GB", (8, 0), 80),
        Gpu("l40s", "NVIDIA L40S", (8, 9), 48),
        Gpu("h100", "NVIDIA H100 80GB HBM3", (9, 0), 80),
        Gpu("h200", "NVIDIA H200", (9, 0), 141),
        Gpu("gh200", "NVIDIA GH200 480GB", (9, 0), 96),
        Gpu("b200", "NVIDIA B200", (10, 0), 180),
        Gpu("gb200", "NVIDIA GB200", (10, 0), 186),
        Gpu("b300", "NVIDIA B300", (10, 3), 288),
        Gpu("gb300", "NVIDIA GB300", (10, 3), 288),
        Gpu("rtx5090", "NVIDIA GeForce RTX 5090", (12, 0), 32),
        Gpu("rtxpro6000", "NVIDIA RTX PRO 6000 Blackwell", (12, 0), 96),
        Gpu("gb10", "NVIDIA GB10", (12, 1), 128),
        # AMD Instinct (CDNA3: gfx942; CDNA4: gfx950), named as amdsmi's market name reads them;
        # (major, minor) is what HIP derives from the arch (vLLM's `_capability_from_gcn_arch`).
        Gpu("mi300x", "AMD Instinct MI300X", (9, 4), 192, arch="gfx942"),
        Gpu("mi325x", "AMD Instinct MI325X", (9, 4), 256, arch="gfx942"),
        Gpu("mi355x", "AMD Instinct MI355X", (9, 5), 288, arch="gfx950"),
    )
}

_AMD_ARCH = re.compile(r"^(gfx\w+|mi\d+\w*)$", re.IGNORECASE)


def resolve(gpu: str | None, sm: str | None) -> Gpu:
    if gpu and sm:
        raise BadInput("give --gpu or --sm, not both")
    if sm:
        return _from_sm(sm)
    key = (gpu or "h100").lower().replace("-", "").replace(" ", "").replace("_", "")
    key = key.removeprefix("amd").removeprefix("instinct").removeprefix("nvidia")
    if key not in GPUS:
        amd = ", ".join(k for k, g in GPUS.items() if g.rocm)
        nvidia = ", ".join(k for k, g in GPUS.items() if not g.rocm)
        raise BadInput(f"--gpu {gpu!r}: unknown; known: NVIDIA {nvidia} (or --sm MAJOR.MINOR); AMD {amd}")
    return GPUS[key]


def _from_sm(sm: str) -> Gpu:
    if _AMD_ARCH.match(sm.strip()):
        amd = ", ".join(f"{k} ({g.arch})" for k, g in GPUS.items() if g.rocm)
        raise BadInput(f"--sm {sm!r}: --sm is an NVIDIA compute capability; name an AMD GPU with --gpu: {amd}")
    try:
        major, minor = (int(x) for x in sm.split("."))
    except ValueError:
        raise BadInput(f"--sm {sm!r}: expected MAJOR.MINOR, e.g. 9.0 (NVIDIA only; AMD GPUs: --gpu mi300x)") from None
    return Gpu(f"sm{major}{minor}", f"NVIDIA GPU (SM {major}.{minor})", (major, minor), 80)
