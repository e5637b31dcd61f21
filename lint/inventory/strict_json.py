"""The one strict JSON reader for every file a checkpoint brings: config.json, hf_quant_config.json,
the weight-map index, and (through safetensors_header) each shard's header.

Python's json module accepts inputs that the tools loading a checkpoint refuse, or that crash
whatever reads the result: NaN and Infinity, integers of thousands of digits (ValueError past
4,300 digits, quadratic arithmetic below that), strings holding lone surrogates (any later
encode raises), and nesting deep enough for RecursionError in json itself or in copy.deepcopy
downstream. Here each of those is a BadInput naming the file, never another exception.

Duplicate keys in config and index files keep json's last-wins reading: vLLM and transformers
read these files with json.load, so that is the checkpoint they load.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, BinaryIO

from ..core import regular_files
from ..core.errors import BadInput

# Twice safetensors' header limit: a weight-map index of a million tensors is ~60 MB.
MAX_JSON_BYTES = 256 * 1024 * 1024
# Real configs nest under 10 levels (quantization_config.config_groups.<g>.weights.<field>).
# 64 leaves room for any writer and keeps every recursive reader downstream (copy.deepcopy
# takes ~3 frames a level; pydantic and json.dumps a frame or two) far from Python's
# 1,000-frame limit, whatever depth the caller already runs at.
CONFIG_MAX_DEPTH = 64
U64_LIMIT = 1 << 64
_I64_MIN = -(1 << 63)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class JsonProblem(ValueError):
    """Raised from inside the decoder's hooks; the message says what is wrong."""


class DupKeys(dict):
    """A JSON object that repeated a key: the dict json builds (last wins), plus every pair as written.

    safetensors (serde) still type-checks a shadowed tensor entry and parses a shadowed value with
    its depth and number limits, so readers of headers look at `pairs`, not just the dict."""

    pairs: list[tuple[str, Any]]
    dup_keys: frozenset[str]


def pairs_noting_dups(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) == len(pairs):
        return d
    out = DupKeys(d)
    out.pairs = pairs
    seen: set[str] = set()
    dups = set()
    for k, _ in pairs:
        if k in seen:
            dups.add(k)
        seen.add(k)
    out.dup_keys = frozenset(dups)
    return out


def reject_constant(name: str) -> Any:
    raise JsonProblem(f"{name} is not valid JSON")


def finite_float(text: str) -> float:
    v = float(text)
    if v in (float("inf"), float("-inf")):
        raise JsonProblem(f"number out of range: {clip(text, 40)}")
    return v


def bounded_int(text: str) -> int:
    """Integers within 64 bits; longer literals are refused before int() spends quadratic time on them."""
    digits = len(text) - text.startswith("-")
    if digits <= 20:
        v = int(text)
        if _I64_MIN <= v < U64_LIMIT:
            return v
    raise JsonProblem(f"integer out of the 64-bit range: {clip(text, 40)}")


_CONFIG_DECODER = json.JSONDecoder(parse_constant=reject_constant, parse_float=finite_float, parse_int=bounded_int)


def read_json_object(path: Path, what: str = "JSON") -> dict[str, Any]:
    """Read a checkpoint's config or index file strictly; the top level must be an object."""
    where = str(path)
    raw = read_bounded(path, MAX_JSON_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"not UTF-8 text (bad byte at offset {e.start})", path=where) from e
    obj = loads(text, where, CONFIG_MAX_DEPTH)
    if not isinstance(obj, dict):
        raise BadInput(f"expected a JSON object at the top level, got {type(obj).__name__}", path=where)
    return obj


def read_bounded(path: Path, limit: int) -> bytes:
    where = str(path)
    f, st = open_regular(path, "not a regular file")
    with f:
        if st.st_size > limit:
            raise BadInput(f"{st.st_size} bytes, over the {limit}-byte limit for a JSON file", path=where)
        try:
            raw = f.read(st.st_size + 1)  # one byte over, to notice a file still growing
        except OSError as e:
            raise BadInput(f"cannot read: {e.strerror or e}", path=where) from e
    if len(raw) > limit:
        raise BadInput(f"over the {limit}-byte limit for a JSON file", path=where)
    return raw


def open_regular(path: Path, not_regular: str) -> tuple[BinaryIO, os.stat_result]:
    """Open a regular file for reading (core.regular_files), or raise BadInput (`not_regular` when
    it is a directory, a FIFO or a device)."""
    try:
        return regular_files.open_regular(path)
    except regular_files.UnreadableFile:
        raise BadInput(not_regular, path=str(path)) from None
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror or e}", path=str(path)) from e


def loads(text: str, where: str, max_depth: int) -> Any:
    """json.loads with the strict rules above; every failure is a BadInput at `where`."""
    try:
        obj = _CONFIG_DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", path=where) from e
    except JsonProblem as e:
        raise BadInput(f"invalid JSON: {e}", path=where) from e
    except RecursionError as e:
        raise BadInput(f"invalid JSON: nested more than {max_depth} levels deep", path=where) from e
    # Counting brackets is a C-speed upper bound on the depth: most files need no walk at all.
    deep = text.count("[") + text.count("{") > max_depth
    odd = "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None
    if deep or odd:
        problem = tree_problem(obj, max_depth, strings=odd)
        if problem:
            raise BadInput(f"invalid JSON: {problem}", path=where)
    return obj


def tree_problem(obj: Any, max_depth: int, *, strings: bool, start: int = 1, wide_ints: bool = False) -> str | None:
    """The first thing wrong in a parsed tree: a container nested deeper than `max_depth` (the outermost
    one is at `start`), a string holding a lone surrogate (`strings`), or an integer no f64 can hold
    (`wide_ints`: serde_json reads integers past 64 bits as f64 and refuses the ones that overflow it).
    Iterative, so no depth reaches Python's recursion limit here."""
    stack = [(obj, start)]
    pop, push = stack.pop, stack.append
    while stack:
        o, depth = pop()
        if isinstance(o, dict):
            items: Any = o.pairs if isinstance(o, DupKeys) else o.items()
        elif isinstance(o, list):
            items = enumerate(o)
        else:
            problem = _scalar_problem(o, strings, wide_ints)
            if problem:
                return problem
            continue
        if depth > max_depth:
            return f"nested more than {max_depth} levels deep"
        for k, v in items:
            if strings and type(k) is str and not _encodable(k):
                return f"lone surrogate in key {clip(k)}"
            if isinstance(v, (dict, list)):
                push((v, depth + 1))
            else:
                problem = _scalar_problem(v, strings, wide_ints)
                if problem:
                    return problem
    return None


def _scalar_problem(v: Any, strings: bool, wide_ints: bool) -> str | None:
    t = type(v)
    if t is str:
        if strings and not _encodable(v):
            return f"lone surrogate in string {clip(v)}"
    elif t is int and wide_ints and not _I64_MIN <= v < U64_LIMIT:
        try:
            float(v)
        except OverflowError:
            return "number out of range"
    return None


def _encodable(s: str) -> bool:
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clip(value: Any, limit: int = 80) -> str:
    """repr(value), cut to `limit` characters: names from a checkpoint can be megabytes long."""
    if isinstance(value, str) and len(value) > limit:
        value = value[:limit]
        return repr(value)[:-1] + "…" + repr(value)[-1]
    if isinstance(value, (list, tuple, dict)) and len(value) > 16:
        return f"<{type(value).__name__} of {len(value)}>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
