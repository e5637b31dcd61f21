"""Whether to colour output, and the few styles mtplint uses.

Precedence: `--color always|never`, then NO_COLOR (https://no-color.org: set and non-empty
disables; an empty value does not), then FORCE_COLOR (https://force-color.org: set and
non-empty enables), then TERM=dumb (disables), then whether the stream is a terminal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import IO, Any

import click

COLOR_MODES = ("auto", "always", "never")

# style name -> click.style arguments
_STYLES: dict[str, dict[str, Any]] = {
    "error": {"fg": "red", "bold": True},
    "warning": {"fg": "yellow", "bold": True},
    "info": {"fg": "cyan", "bold": True},
    "code": {"bold": True},
    "dim": {"dim": True},
    "path": {"bold": True},
}


def use_color(mode: str = "auto", stream: IO[Any] | None = None, env: Mapping[str, str] | None = None) -> bool:
    if mode == "always":
        return True
    if mode == "never":
        return False
    env = os.environ if env is None else env
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


Painter = Callable[[str, str], str]


def painter(color: bool) -> Painter:
    """paint(style, text): `text` in the named style, or unchanged without colour."""
    if not color:
        return lambda style, text: text
    return lambda style, text: click.style(text, **_STYLES.get(style, _STYLES["code"]))
