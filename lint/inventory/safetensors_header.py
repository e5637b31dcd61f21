"""Read one safetensors shard's header with two small reads, never touching tensor data.

The checks decide exactly as the safetensors reader (0.8) does, so a shard passes here if and
only if it opens in vLLM (tests/cli/test_input_hardening.py and scripts/fuzz_inputs.py compare
the two); huggingface_hub's header helpers skip them, hence our own parser.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from .model import TensorInfo
from .strict_json import (
    U64_LIMIT,
    DupKeys,
    JsonProblem,
    clip,
    finite_float,
    open_regular,
    pairs_noting_dups,
    reject_constant,
    tree_problem,
)

MAX_HEADER_BYTES = 100_000_000  # safetensors' MAX_HEADER_SIZE
# serde_json's recursion limit of 128 lets a document nest 127 containers deep.
HEADER_MAX_DEPTH = 127

# Element size in bits: sub-byte dtypes (F4, F6) are why this is not bytes.
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}
# A Git LFS pointer file (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md) left where a
# clone without `git lfs pull` should have the shard; pointers are under 1024 bytes.
LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
LFS_POINTER_MESSAGE = (
    "a Git LFS pointer file, not the shard: the content was not fetched "
    "(run `git lfs pull` in the clone, or lint the repository as hf://ORG/NAME)"
)
_NEGATIVE = re.compile(rb"[\[,]\s*-")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_WHOLE_BYTE_SIZES = {k: v // 8 for k, v in DTYPE_BITS.items() if v % 8 == 0}
_FIELD_ORDER = ("dtype", "shape", "data_offsets")  # serde's order for an entry written as an array
_FIELDS = frozenset(_FIELD_ORDER)
_FAST_LIMIT = 1 << 61  # below this every byte count also fits u64 as a bit count


@dataclass
class ShardHeader:
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] | None
    header_len: int
    file_size: int


def read_shard_header(path: str | os.PathLike, rel_name: str | None = None) -> ShardHeader:
    """Parse and validate `path`'s header; TensorInfo.file is `rel_name` (default: the file name)."""
    path = Path(path)
    where = str(path)
    rel = rel_name if rel_name is not None else path.name
    size, n, raw = _read_raw(path, where)
    return parse_shard_header(size, n, raw, where, rel)


def parse_shard_header(size: int, n: int, raw: bytes, where: str, rel: str) -> ShardHeader:
    """Validate a header read by any means (a local file, two range requests): `size` is the whole
    file's length, `n` the header length from its first 8 bytes, `raw` those n bytes."""
    header = decode_header(raw, where)
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(type(v) is str for v in _values(metadata))):
        raise BadInput("bad header: __metadata__ must be an object of strings", path=where)
    # The fast path's int checks would let JSON true/false or a negative dimension through;
    # such bytes anywhere (even inside a name) send the header down the slow path.
    plain = b"true" not in raw and b"false" not in raw and (b"-" not in raw or _NEGATIVE.search(raw) is None)
    tensors, data_len = _validate(header, where, rel, 8 + n, plain)
    end = 8 + n + data_len
    if end > size:
        raise BadInput(f"truncated: tensor data ends at byte {end} but the file has {size}", path=where)
    if end < size:
        # safetensors refuses this too ("file not fully covered"), so vLLM could not load it.
        raise BadInput(
            f"{size - end} stray bytes after the tensor data (ends at byte {end}, "
            f"file has {size}); safetensors rejects files it does not fully cover",
            path=where,
        )
    return ShardHeader(tensors, metadata, n, size)


def read_header(path: str | os.PathLike, rel_name: str | None = None) -> dict[str, TensorInfo]:
    return read_shard_header(path, rel_name).tensors


def _read_raw(path: Path, where: str) -> tuple[int, int, bytes]:
    f, st = open_regular(path, "not a safetensors file: not a regular file")
    size = st.st_size
    with f:
        try:
            first = f.read(8)
            n = header_length(first, size, where)
            raw = f.read(n)
        except OSError as e:
            raise BadInput(f"cannot read: {e.strerror or e}", path=where) from e
    if len(raw) != n:
        raise BadInput(f"truncated: header says {n} bytes but only {len(raw)} could be read", path=where)
    return size, n, raw


def header_length(first: bytes, size: int, where: str) -> int:
    """The header length the first 8 bytes of a `size`-byte file declare, checked as safetensors does."""
    if size < 8 or len(first) < 8:
        raise BadInput(f"not a safetensors file: {size} bytes, shorter than the 8-byte header length", path=where)
    if first.startswith(LFS_POINTER_PREFIX[:8]) and size < 1024:
        # Read as a length these bytes are ~2.3e18: say what the file really is.
        raise BadInput(LFS_POINTER_MESSAGE, path=where)
    n = int.from_bytes(first[:8], "little")
    if n > MAX_HEADER_BYTES:
        raise BadInput(
            f"not a safetensors file: header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit", path=where
        )
    if 8 + n > size:
        raise BadInput(
            f"truncated: header says {n} bytes but the file has only {size - 8} after the 8-byte length",
            path=where,
        )
    return n


def decode_header(raw: bytes, where: str) -> dict:
    """The header JSON as serde_json reads it for safetensors: no NaN/Infinity, no number beyond an
    f64, no lone surrogate, no nesting past 127 levels (checked with the entries, see _validate_slow)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"bad header: invalid UTF-8 at header byte {e.start}", path=where) from e
    header = _parse(raw, text, where)
    if not isinstance(header, dict):
        raise BadInput(f"bad header: expected a JSON object, got {type(header).__name__}", path=where)
    if isinstance(header, DupKeys) and "__metadata__" in header.dup_keys:
        raise BadInput("bad header: __metadata__ appears twice", path=where)
    # Only a \uD800-\uDFFF escape can put a surrogate in a decoded string; pairs are joined by json.
    if b"\\u" in raw and _SURROGATE_ESCAPE.search(raw):
        problem = tree_problem(header, HEADER_MAX_DEPTH, strings=True, wide_ints=True)
        if problem:
            raise BadInput(f"bad header: invalid JSON: {problem}", path=where)
    return header


def _parse(raw: bytes, text: str, where: str) -> object:
    # serde_json reads `-0` as a float (no integer field takes it); only then pay for an int hook.
    decoder = _SIGNED_DECODER if b"-" in raw and _NEGATIVE.search(raw) else _DECODER
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as e:
        if not text.strip():
            raise BadInput("bad header: empty JSON header", path=where) from e
        raise BadInput(f"bad header: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", path=where) from e
    except JsonProblem as e:
        raise BadInput(f"bad header: invalid JSON: {e}", path=where) from e
    except ValueError as e:  # an integer literal past 4,300 digits: beyond any f64 as well
        raise BadInput("bad header: invalid JSON: number out of range", path=where) from e
    except RecursionError as e:
        raise BadInput(f"bad header: JSON nested more than {HEADER_MAX_DEPTH} levels deep", path=where) from e


def _values(d: dict) -> Any:
    """Every value as written, a repeated key's shadowed ones included (serde checks them all)."""
    return (v for _, v in d.pairs) if isinstance(d, DupKeys) else d.values()


def _signed_int(text: str) -> int | float:
    return -0.0 if text == "-0" else int(text)


_DECODER = json.JSONDecoder(
    object_pairs_hook=pairs_noting_dups, parse_constant=reject_constant, parse_float=finite_float
)
_SIGNED_DECODER = json.JSONDecoder(
    object_pairs_hook=pairs_noting_dups, parse_constant=reject_constant, parse_float=finite_float, parse_int=_signed_int
)


def _validate(header: dict, where: str, rel: str, base: int, plain: bool) -> tuple[dict[str, TensorInfo], int]:
    """One pass over the entries in file order, which is offset order for every writer we know of.

    Anything unusual (sub-byte dtypes, zero-size tensors, booleans or negatives in the JSON,
    another order, extra keys, any error) goes to the slow path, which decides exactly as
    safetensors does and names the problem.
    """
    if not plain or not _FAST_INIT or isinstance(header, DupKeys):
        return _validate_slow(header, where, rel, base)
    out: dict[str, TensorInfo] = {}
    pos = 0
    size_of = _WHOLE_BYTE_SIZES.get
    new, set_, cls = object.__new__, object.__setattr__, TensorInfo
    for name, info in header.items():
        try:
            if type(info) is not dict or len(info) != 3:
                return _validate_slow(header, where, rel, base)
            shape = info["shape"]
            offsets = info["data_offsets"]
            nbytes = size_of(info["dtype"])
            if (
                nbytes is None  # a dtype without a whole-byte size: the slow path explains it
                or type(shape) is not list
                or len(shape) > 8
                or type(offsets) is not list
                or len(offsets) != 2
            ):
                return _validate_slow(header, where, rel, base)
            for d in shape:
                # Bounded before multiplying: 8 dims of 4,000 digits each would cost ms per entry.
                if type(d) is not int or d >= _FAST_LIMIT:
                    return _validate_slow(header, where, rel, base)
                nbytes *= d
            begin, end = offsets
            # Negatives were ruled out by the caller. A non-zero size equal to the span, with every
            # offset below 2**61 (checked on the total below), keeps every partial product and the
            # bit count inside u64, the bounds safetensors enforces.
            if begin != pos or end - begin != nbytes or not nbytes or type(begin) is not int or type(end) is not int:
                return _validate_slow(header, where, rel, base)
        except Exception:
            return _validate_slow(header, where, rel, base)
        pos = end
        # Same object TensorInfo(...) builds, without its six frozen __setattr__ calls (see _FAST_INIT).
        t = new(cls)
        set_(
            t,
            "__dict__",
            {
                "name": name,
                "dtype": info["dtype"],
                "shape": tuple(shape),
                "file": rel,
                "begin": base + begin,
                "end": base + end,
            },
        )
        out[name] = t
    if pos >= _FAST_LIMIT:
        return _validate_slow(header, where, rel, base)
    return out, pos


def _validate_slow(header: dict, where: str, rel: str, base: int) -> tuple[dict[str, TensorInfo], int]:
    _check_whole(header, where)
    rows = []
    for name, info in header.items():
        fields = _fields(info)
        if fields is None:
            raise BadInput(_entry_problem(name, info), path=where)
        dtype, shape, offsets = fields
        begin, end = offsets
        nbits = _nbits(shape, DTYPE_BITS[dtype])
        if nbits is None:
            raise BadInput(
                f"bad header: tensor {clip(name)} {dtype}{_shape_text(shape)} overflows 64 bits "
                "(safetensors rejects it)",
                path=where,
            )
        rows.append((begin, end, name, dtype, shape, nbits))
    rows.sort(key=lambda r: (r[0], r[1]))
    pos = 0
    out: dict[str, TensorInfo] = {}
    for begin, end, name, dtype, shape, nbits in rows:
        what = f"bad header: tensor {clip(name)}"
        if end < begin:
            raise BadInput(f"{what} data_offsets [{begin}, {end}] end before they begin", path=where)
        if begin != pos:
            raise BadInput(
                f"{what} data_offsets [{begin}, {end}] "
                f"{'overlap the previous tensor' if begin < pos else 'leave a gap'}: "
                f"expected it to start at {pos}",
                path=where,
            )
        if nbits % 8:
            raise BadInput(f"{what} {dtype}{_shape_text(shape)} does not end on a byte boundary", path=where)
        if end - begin != nbits >> 3:
            raise BadInput(
                f"{what} is {dtype}{_shape_text(shape)} = {nbits >> 3} bytes but data_offsets span {end - begin}",
                path=where,
            )
        pos = end
        out[name] = TensorInfo(name, dtype, tuple(shape), rel, base + begin, base + end)
    return out, pos


def _check_whole(header: dict, where: str) -> None:
    """What serde refuses anywhere in the document, shadowed entries of a repeated name included."""
    problem = tree_problem(header, HEADER_MAX_DEPTH, strings=False, wide_ints=True)
    if problem:
        raise BadInput(f"bad header: invalid JSON: {problem}", path=where)
    if isinstance(header, DupKeys):
        # A repeated tensor name: the last entry is the tensor, but every one must be a valid entry.
        for name, info in header.pairs:
            if name != "__metadata__" and _fields(info) is None:
                raise BadInput(_entry_problem(name, info), path=where)


def _fields(info: object) -> tuple[str, list, list] | None:
    """(dtype, shape, data_offsets) when the entry is one safetensors accepts, else None.

    serde also takes an entry written as a 3-element array and a dtype written as {"F32": null};
    a repeated dtype/shape/data_offsets key is an error there, an unknown key is ignored."""
    if isinstance(info, dict):
        if isinstance(info, DupKeys) and info.dup_keys & _FIELDS:
            return None
        if not info.keys() >= _FIELDS:
            return None
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    elif isinstance(info, list) and len(info) == 3:
        dtype, shape, offsets = info
    else:
        return None
    dtype = _dtype_name(dtype)
    if dtype is None or not _is_u64_list(shape) or not (_is_u64_list(offsets) and len(offsets) == 2):
        return None
    return dtype, shape, offsets


def _dtype_name(dtype: object) -> str | None:
    if isinstance(dtype, dict) and len(dtype) == 1 and not isinstance(dtype, DupKeys):
        ((dtype, unit),) = dtype.items()
        if unit is not None:
            return None
    return dtype if type(dtype) is str and dtype in DTYPE_BITS else None


def _is_u64_list(values: object) -> bool:
    return type(values) is list and all(type(v) is int and 0 <= v < U64_LIMIT for v in values)


def _nbits(shape: list[int], bits: int) -> int | None:
    """Element count times bits, folded left to right and refused once past u64, as safetensors'
    checked_mul does: [0, 2**40, 2**40] is empty, [2**40, 2**40, 0] overflows. Never a big product."""
    n = 1
    for d in shape:
        n *= d
        if n >= U64_LIMIT:
            return None
    n *= bits
    return n if n < U64_LIMIT else None


def _shape_text(shape: list) -> str:
    if len(shape) <= 8:
        return str(list(shape))
    return f"[{', '.join(map(str, shape[:4]))}, … {len(shape) - 4} more]"


def _entry_problem(name: str, info: object) -> str:
    """Name what is wrong with one header entry (the slow path, only on failure)."""
    head = f"bad header: tensor {clip(name)}"
    if isinstance(info, list):
        if len(info) != 3:
            return f"{head} is a list of {len(info)}, not an object"
        info = dict(zip(_FIELD_ORDER, info, strict=True))
    elif not isinstance(info, dict):
        return f"{head} is not an object"
    elif isinstance(info, DupKeys) and info.dup_keys & _FIELDS:
        return f"{head} repeats {', '.join(sorted(info.dup_keys & _FIELDS))}"
    for key in _FIELD_ORDER:
        if key not in info:
            return f"{head} has no {key}"
    dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
    if _dtype_name(dtype) is None:
        return f"{head} has unknown dtype {clip(dtype)}"
    if not _is_u64_list(shape):
        return f"{head} has invalid shape {clip(shape)} (want a list of integers in [0, 2**64))"
    if not (_is_u64_list(offs) and len(offs) == 2):
        return f"{head} has invalid data_offsets {clip(offs)} (want [begin, end])"
    return f"{head} is malformed"


def _plain_tensor_info() -> bool:
    """Whether TensorInfo is still a plain six-field dataclass, so filling __dict__ directly builds the
    object its __init__ would: that __init__ costs ~2 µs (frozen fields), the largest per-tensor cost."""
    names = [f.name for f in dataclasses.fields(TensorInfo)]
    return (
        names == ["name", "dtype", "shape", "file", "begin", "end"]
        and not hasattr(TensorInfo, "__slots__")
        and not hasattr(TensorInfo, "__post_init__")
    )


_FAST_INIT = _plain_tensor_info()
