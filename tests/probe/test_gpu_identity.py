"""`--gpu h100` / `--gpu h200` answer vLLM's device queries as the real devices do: the name,
compute capability, memory and compute units read off an H100 and an H200 (torch and NVML,
scripts/gpu_identity.py on the lent GPU machines, tests/data/gpu_identity/)."""

from __future__ import annotations

import json

import pytest
from mtplint.pipeline.gpus import resolve
from paths import TESTS

MEASURED = TESTS / "data" / "gpu_identity"


@pytest.mark.parametrize("key", ["h100", "h200"])
def test_stand_in_answers_as_the_measured_device(key: str) -> None:
    record = json.loads((MEASURED / f"{key}.json").read_text())
    gpu = resolve(key, None)
    for source in ("torch", "nvml"):
        assert gpu.name == record[source]["name"], source
        assert list(gpu.sm) == record[source]["capability"], source
    # vLLM's CUDA platform returns torch's figure (get_device_total_memory); the stand-in's nominal
    # GiB only sizes caches the probe never builds, and stays within 1.5% of it.
    assert abs(gpu.memory - record["torch"]["total_memory"]) / gpu.memory < 0.015
    # The CUDA stand-in's num_compute_units (lint/probe/child/runtime_shim.py) answers 132.
    assert record["torch"]["multi_processor_count"] == 132
