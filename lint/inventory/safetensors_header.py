"""Read one safetensors shard's header with two small reads, never touching tensor data.

The checks mirror what the safetensors reader (0.8) rejects, so a shard that passes here
also opens in vLLM; huggingface_hub's header helpers skip them, hence our own parser.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from mtplint.errors import BadInput
from mtplint.inventory.model import TensorInfo

MAX_HEADER_BYTES = 100_000_000  # safetensors' MAX_HEADER_SIZE

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
_NEGATIVE = re.compile(rb"[\[,]\s*-")
_WHOLE_BYTE_SIZES = {k: v // 8 for k, v in DTYPE_BITS.items() if v % 8 == 0}


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
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise BadInput(
                    f"not a safetensors file: {size} bytes, shorter than the 8-byte header length", path=where
                )
            n = int.from_bytes(f.read(8), "little")
            if n > MAX_HEADER_BYTES:
                raise BadInput(
                    f"not a safetensors file: header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit", path=where
                )
            if 8 + n > size:
                raise BadInput(
                    f"truncated: header says {n} bytes but the file has only {size - 8} after the 8-byte length",
                    path=where,
                )
            raw = f.read(n)
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror or e}", path=where) from e
    header = _decode(raw, where)
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(type(v) is str for v in metadata.values())):
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


def _decode(raw: bytes, where: str) -> dict:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"bad header: invalid UTF-8 at header byte {e.start}", path=where) from e
    try:
        header = json.loads(text)
    except json.JSONDecodeError as e:
        if not text.strip():
            raise BadInput("bad header: empty JSON header", path=where) from e
        raise BadInput(f"bad header: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", path=where) from e
    if not isinstance(header, dict):
        raise BadInput(f"bad header: expected a JSON object, got {type(header).__name__}", path=where)
    return header


def _validate(header: dict, where: str, rel: str, base: int, plain: bool) -> tuple[dict[str, TensorInfo], int]:
    """One pass over the entries in file order, which is offset order for every writer we know of.

    Anything unusual (sub-byte dtypes, booleans in the JSON, another order, any error) goes to
    the slow path, which sorts by offset and names the problem.
    """
    if not plain or not _FAST_INIT:
        return _validate_slow(header, where, rel, base)
    out: dict[str, TensorInfo] = {}
    pos = 0
    size_of = _WHOLE_BYTE_SIZES.get
    prod = math.prod
    new, set_, cls = object.__new__, object.__setattr__, TensorInfo
    for name, info in header.items():
        try:
            shape = info["shape"]
            begin, end = info["data_offsets"]
            dtype = info["dtype"]
            nbytes = prod(shape) * size_of(dtype)
            # Bools and negative dims were ruled out by the caller; non-int dims make nbytes a non-int.
            if (
                begin != pos
                or end - begin != nbytes
                or type(nbytes) is not int
                or type(begin) is not int
                or type(end) is not int
                or type(shape) is not list
            ):
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
                "dtype": dtype,
                "shape": tuple(shape),
                "file": rel,
                "begin": base + begin,
                "end": base + end,
            },
        )
        out[name] = t
    return out, pos


def _validate_slow(header: dict, where: str, rel: str, base: int) -> tuple[dict[str, TensorInfo], int]:
    rows = []
    for name, info in header.items():
        try:
            dtype = info["dtype"]
            shape = info["shape"]
            begin, end = info["data_offsets"]
            bits = DTYPE_BITS[dtype]
            numel = math.prod(shape)
        except Exception:
            raise BadInput(_entry_problem(name, info), path=where) from None
        if (
            type(begin) is not int
            or type(end) is not int
            or begin < 0
            or type(shape) is not list
            or type(numel) is not int
            or not _dims_ok(shape)
        ):
            raise BadInput(_entry_problem(name, info), path=where)
        rows.append((begin, end, name, dtype, shape, numel * bits))
    rows.sort(key=lambda r: (r[0], r[1]))
    pos = 0
    out: dict[str, TensorInfo] = {}
    for begin, end, name, dtype, shape, nbits in rows:
        if end < begin:
            raise BadInput(
                f"bad header: tensor {name!r} data_offsets [{begin}, {end}] end before they begin", path=where
            )
        if begin != pos:
            raise BadInput(
                f"bad header: tensor {name!r} data_offsets [{begin}, {end}] "
                f"{'overlap the previous tensor' if begin < pos else 'leave a gap'}: "
                f"expected it to start at {pos}",
                path=where,
            )
        if nbits % 8:
            raise BadInput(f"bad header: tensor {name!r} {dtype}{shape} does not end on a byte boundary", path=where)
        if end - begin != nbits >> 3:
            raise BadInput(
                f"bad header: tensor {name!r} is {dtype}{shape} = {nbits >> 3} bytes "
                f"but data_offsets span {end - begin}",
                path=where,
            )
        pos = end
        out[name] = TensorInfo(name, dtype, tuple(shape), rel, base + begin, base + end)
    return out, pos


def _dims_ok(shape: list) -> bool:
    for d in shape:
        if type(d) is not int or d < 0:
            return False
    return True


def _entry_problem(name: str, info: object) -> str:
    """Name what is wrong with one header entry (the slow path, only on failure)."""
    head = f"bad header: tensor {name!r}"
    if not isinstance(info, dict):
        return f"{head} is not an object"
    for key in ("dtype", "shape", "data_offsets"):
        if key not in info:
            return f"{head} has no {key}"
    dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        return f"{head} has unknown dtype {dtype!r}"
    if not isinstance(shape, list) or not _dims_ok(shape):
        return f"{head} has invalid shape {shape!r} (want a list of non-negative integers)"
    if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int and o >= 0 for o in offs)):
        return f"{head} has invalid data_offsets {offs!r} (want [begin, end])"
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
