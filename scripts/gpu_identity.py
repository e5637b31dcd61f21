"""Print what a real GPU tells the software vLLM reads (torch and NVML), as JSON, so that
`--gpu`'s stand-in answers (lint/pipeline/gpus.py) can be compared with a measured device.

    python3 scripts/gpu_identity.py [OUT.json]

Run on a machine with the GPU; needs torch (CUDA build), optionally nvidia-ml-py. The result is
kept in tests/data/gpu_identity/ and checked by tests/probe/test_gpu_identity.py.
"""

from __future__ import annotations

import datetime
import json
import sys


def torch_identity() -> dict:
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "name": torch.cuda.get_device_name(0),
        "capability": list(torch.cuda.get_device_capability(0)),
        "total_memory": props.total_memory,
        "multi_processor_count": props.multi_processor_count,
        "device_count": torch.cuda.device_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def nvml_identity() -> dict:
    try:
        import pynvml
    except ImportError as e:
        return {"error": str(e)}
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return {
            "name": name.decode() if isinstance(name, bytes) else name,
            "capability": [major, minor],
            "total_memory": pynvml.nvmlDeviceGetMemoryInfo(handle).total,
            "driver": pynvml.nvmlSystemGetDriverVersion(),
        }
    finally:
        pynvml.nvmlShutdown()


def main() -> None:
    record = {
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "torch": torch_identity(),
        "nvml": nvml_identity(),
    }
    text = json.dumps(record, indent=2, sort_keys=True)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
