"""mtplint: will this checkpoint load and draft correctly with MTP on this vLLM?

Python API: `mtplint.lint(path, **options) -> mtplint.Report` (lint/api.py). Imported on first
use: the probe child imports this package in vLLM's environment, which need not have click.
"""

from typing import Any

from .core import launch_env  # noqa: F401  (the environment as started, before torch writes to it)
from .core.versions import __version__

__all__ = ["Report", "__version__", "lint"]


def __getattr__(name: str) -> Any:
    if name in ("lint", "Report"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'mtplint' has no attribute {name!r}")
