"""Names that imports bind and that raise when used."""

from __future__ import annotations

from typing import Any


class StandInError(RuntimeError):
    pass


def stub_getattr(module: str) -> Any:
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*_args: Any, **_kwargs: Any) -> Any:
            raise StandInError(
                f"{module}.{name}: torchvision is a stand-in in mtplint's CPU engine (images are not served)"
            )

        unavailable.__name__ = name
        return unavailable

    return __getattr__
