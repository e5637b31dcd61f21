"""Usage checks that run before any probing: a wrong command line (or project setting) is
exit 2 at once, not a finding or an exit 3 after the probe's 10 to 40 seconds.

Each check reads the merged settings (command line over project file over checkpoint file),
so a value from `mtplint.toml` is held to the same rules as the option.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from .schema import LintSettings


def check_settings(s: LintSettings, rule_codes: Iterable[str], rule_names: dict[str, str] | None = None) -> None:
    """Everything that can be judged without the checkpoint's probe: codes, timeout, kv dtype."""
    codes = sorted(rule_codes)
    for option, given in (("--select", s.select), ("--ignore", s.ignore)):
        check_codes(option, list(given) if given is not None else None, codes, rule_names or {})
    check_timeout(s.probe_timeout)
    check_kv_cache_dtype(s)


def check_codes(option: str, given: list[str] | None, codes: list[str], names: dict[str, str]) -> None:
    """Each of `given` must be a rule code or a prefix of one (`MTP0`); anything else would
    silently select or ignore nothing."""
    for pattern in given or []:
        p = pattern.upper()
        if any(c.startswith(p) for c in codes):
            continue
        by_name = {n.upper(): c for c, n in names.items()}
        if p in by_name:
            hint = f"; did you mean {by_name[p]} ({names[by_name[p]]})?"
        else:
            close = closest(p, codes)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise BadInput(f"{option}: unknown rule code {pattern!r}{hint} (`mtplint rules` lists them)")


def closest(word: str, candidates: Iterable[str]) -> list[str]:
    """The candidates fewest edits away (a typo: MTP0O1 -> MTP001, fp9 -> fp8), at most 3,
    none when even the closest is more than a third of the word away."""
    scored = sorted((_edits(word.lower(), c.lower()), c) for c in candidates)
    if not scored or scored[0][0] > max(1, len(word) // 3):
        return []
    return [c for d, c in scored if d == scored[0][0]][:3]


def _edits(a: str, b: str) -> int:
    """Levenshtein distance."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def check_timeout(seconds: Any) -> None:
    if seconds is None:
        return
    if not isinstance(seconds, (int, float)) or not (0 < seconds < math.inf):
        raise BadInput(f"--probe-timeout must be a positive number of seconds, not {seconds!r}")


def check_outputs(formats: list[str], outputs: list[Path]) -> None:
    """One --output per --format, and each one a file this process can write."""
    if outputs and len(outputs) != len(formats):
        raise BadInput("give one --output per --format")
    for out in outputs:
        if str(out) == "-":
            continue
        if out.is_dir():
            raise BadInput("--output is a directory; give a file name", path=str(out))
        parent = out.parent if str(out.parent) else Path(".")
        if not parent.is_dir():
            raise BadInput(f"--output: directory {parent} does not exist", path=str(out))
        if not os.access(parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
            raise BadInput("--output: not writable", path=str(out))


# `CacheDType = Literal["auto", "float16", ...]` in vllm/config/cache.py (vllm/config.py before
# the config package split).
_CACHE_DTYPE = re.compile(r"^CacheDType\s*=\s*Literal\[(.*?)\]", re.S | re.M)
_QUOTED = re.compile(r"""["']([^"']+)["']""")
_FIND_VLLM = (
    "import importlib.util as u\n"
    "s = u.find_spec('vllm')\n"
    "print((s.submodule_search_locations or [''])[0] if s else '')\n"
)


def check_kv_cache_dtype(s: LintSettings) -> None:
    dtype = s.kv_cache_dtype
    if not dtype:
        return
    python = _probed_python(s)
    if python is False:
        return  # an environment provisioned later: its choices cannot be read yet
    choices = kv_cache_dtypes(python)
    if choices is None or dtype in choices:
        return
    close = closest(dtype, choices)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise BadInput(
        f"--kv-cache-dtype {dtype!r} is not one the probed vLLM accepts{hint} (choices: {', '.join(choices)})"
    )


def _probed_python(s: LintSettings) -> str | bool | None:
    """The interpreter the probe will run: --vllm-python, else mtplint's own (None) unless
    --vllm-commit / --vllm-source name an environment chosen later (False)."""
    from ..envs.resolve import interpreter_path

    python = interpreter_path(s.vllm_python)
    if python:
        return python
    return False if s.vllm_commit or s.vllm_source else None


@cache
def kv_cache_dtypes(python: str | None) -> tuple[str, ...] | None:
    """The --kv-cache-dtype choices of the vLLM installed for `python` (None: this interpreter),
    read from its source without importing vLLM; None when they cannot be read."""
    vllm_dir = _vllm_dir(python)
    if not vllm_dir:
        return None
    for rel in ("config/cache.py", "config.py"):
        try:
            text = (Path(vllm_dir) / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        m = _CACHE_DTYPE.search(text)
        if m:
            found = tuple(_QUOTED.findall(m.group(1)))
            return found or None
    return None


def _vllm_dir(python: str | None) -> str | None:
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        try:
            spec = importlib.util.find_spec("vllm")  # finds the package; does not import it
        except (ImportError, ValueError):
            return None
        locations = spec.submodule_search_locations if spec else None
        return locations[0] if locations else None
    try:
        out = subprocess.run([python, "-c", _FIND_VLLM], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[-1] if out.returncode == 0 and lines and lines[-1] else None
