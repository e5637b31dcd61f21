"""GPU names users pass (--gpu) mapped to what vLLM sees: compute capability, name, memory."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import BadInput


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    sm: tuple[int, int]
    memory_gib: int

    @property
    def memory(self) -> int:
        return self.memory_gib * 2**30


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
    )
}


def resolve(gpu: str | None, sm: str | None) -> Gpu:
    if gpu and sm:
        raise BadInput("give --gpu or --sm, not both")
    if sm:
        try:
            major, minor = (int(x) for x in sm.split("."))
        except ValueError:
            raise BadInput(f"--sm {sm!r}: expected MAJOR.MINOR, e.g. 9.0") from None
        return Gpu(f"sm{major}{minor}", f"NVIDIA GPU (SM {major}.{minor})", (major, minor), 80)
    key = (gpu or "h100").lower().replace("-", "").replace(" ", "")
    if key not in GPUS:
        raise BadInput(f"--gpu {gpu!r}: unknown; known: {', '.join(GPUS)} (or pass --sm MAJOR.MINOR)")
    return GPUS[key]
