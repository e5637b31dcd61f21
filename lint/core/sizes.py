"""Sizes as a user writes them ("8GiB", "512 MiB", a number of bytes) and as mtplint prints them."""

from __future__ import annotations

import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)


def parse_bytes(value: object) -> int:
    """Bytes from an int or text such as "8GiB", "8G", "512 MiB" (binary units, so "8GB" is 8
    GiB too). ValueError says what is accepted."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and (m := _SIZE.fullmatch(value.strip())):
        return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    raise ValueError("a size such as 8GiB, 512MiB or a number of bytes")


def format_size(size: int) -> str:
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} B"
