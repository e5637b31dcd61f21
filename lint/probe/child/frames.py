"""Turn an exception raised inside vLLM into a record naming the vLLM frame that raised it."""

from __future__ import annotations

import traceback
from typing import Any, TypeVar

from ..report import ErrorRecord, Frame

E = TypeVar("E", bound=ErrorRecord)


def vllm_frame(exc: BaseException) -> Frame | None:
    """The innermost traceback frame inside the vllm package: where vLLM itself raised."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = frame.filename.replace("\\", "/")
        if "/vllm/" in path and "/mtplint/" not in path:
            rel = path[path.rfind("/vllm/") + 1 :]
            found = Frame(file=rel, line=frame.lineno, function=frame.name, code=frame.line)
    return found


def error_record(exc: BaseException, kind: type[E] = ErrorRecord, **context: Any) -> E:  # type: ignore[assignment]
    """`kind` (ErrorRecord or a subclass) for `exc`, with the subclass's `context` fields."""
    return kind(type=type(exc).__name__, message=str(exc).strip()[:2000], frame=vllm_frame(exc), **context)
