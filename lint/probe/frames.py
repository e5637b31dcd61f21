"""Turn an exception raised inside vLLM into a record naming the vLLM frame that raised it."""

from __future__ import annotations

import traceback
from typing import Any


def vllm_frame(exc: BaseException) -> dict[str, Any] | None:
    """The innermost traceback frame inside the vllm package: where vLLM itself raised."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = frame.filename.replace("\\", "/")
        if "/vllm/" in path and "/mtplint/" not in path:
            rel = path[path.rfind("/vllm/") + 1 :]
            found = {"file": rel, "line": frame.lineno, "function": frame.name, "code": frame.line}
    return found


def error_record(exc: BaseException) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": str(exc).strip()[:2000],
        "frame": vllm_frame(exc),
    }
