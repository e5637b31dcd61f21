"""The speculative methods a vLLM release declares, read from that release's own source.

`SpeculativeConfig.method` is a `Literal` (`SpeculativeMethod` in vllm/config/speculative.py
since 0.11, in vllm/config.py before) built from other Literal aliases (MTPModelTypes,
EagleModelTypes, ...). The names are read from the probed interpreter's installed file with
`ast`, without importing vLLM (that costs ~10 s), so `--method` is judged against the
release that will build the draft, not a list written here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

# Where vLLM takes the draft from the target checkpoint when no `model` is given
# (SpeculativeConfig.__post_init__, 0.33.0: "mtp" and "dspark").
EMBEDDED = ("mtp", "dspark")
# Methods that build no draft model from a checkpoint: nothing here for a weight lint.
MODEL_FREE = ("ngram", "[ngram]", "ngram_gpu", "suffix", "custom_class", "extract_hidden_states")
# Used only where the probed release's source cannot be read (a fallback, vLLM 0.33.0's list).
FALLBACK = (
    "ngram",
    "draft_model",
    "suffix",
    "custom_class",
    "eagle",
    "eagle3",
    "extract_hidden_states",
    "mtp",
    "dflash",
    "ngram_gpu",
    "dspark",
)

_FIND_SOURCE = (
    "import importlib.util as u, pathlib\n"
    "s = u.find_spec('vllm')\n"
    "p = pathlib.Path(s.origin).parent if s and s.origin else None\n"
    "for c in ([p / 'config' / 'speculative.py', p / 'config.py', p / 'config' / '__init__.py'] if p else []):\n"
    "    if c.is_file() and 'SpeculativeMethod' in c.read_text(errors='replace'):\n"
    "        print(c); break\n"
)


def declared(python: str | None) -> tuple[str, ...] | None:
    """The method names `python`'s vLLM declares (family MTP aliases included, in source
    order); None where its source cannot be found or read."""
    try:
        out = subprocess.run([python or sys.executable, "-c", _FIND_SOURCE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = out.stdout.strip()
    if out.returncode != 0 or not path:
        return None
    try:
        return methods_in_source(Path(path).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def methods_in_source(source: str) -> tuple[str, ...] | None:
    """`SpeculativeMethod`'s names in a vllm/config source file, aliases expanded."""
    aliases: dict[str, ast.expr] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            aliases[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            aliases[node.target.id] = node.value
    if "SpeculativeMethod" not in aliases:
        return None
    names: list[str] = []
    _expand(aliases["SpeculativeMethod"], aliases, names, set())
    return tuple(dict.fromkeys(names)) or None


def _expand(node: ast.expr, aliases: dict[str, ast.expr], out: list[str], seen: set[str]) -> None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        out.append(node.value)
    elif isinstance(node, ast.Subscript):  # Literal[...]
        _expand(node.slice, aliases, out, seen)
    elif isinstance(node, ast.Tuple):
        for element in node.elts:
            _expand(element, aliases, out, seen)
    elif isinstance(node, ast.BinOp):  # A | B
        _expand(node.left, aliases, out, seen)
        _expand(node.right, aliases, out, seen)
    elif isinstance(node, ast.Name) and node.id in aliases and node.id not in seen:
        _expand(aliases[node.id], aliases, out, seen | {node.id})


def family_aliases(methods: tuple[str, ...]) -> tuple[str, ...]:
    """The per-family MTP names (deepseek_mtp, ...): vLLM rewrites them to "mtp"."""
    return tuple(m for m in methods if m.endswith("_mtp"))


def canonical(method: str, methods: tuple[str, ...]) -> str:
    """The method vLLM goes on with: a family MTP name is "mtp" where the release declares it."""
    if method in family_aliases(methods) and "mtp" in methods:
        return "mtp"
    return "ngram" if method == "[ngram]" else method


def listing(methods: tuple[str, ...]) -> str:
    """The methods for a message: family MTP aliases summarised, as they all mean "mtp"."""
    aliases = family_aliases(methods)
    shown = [m for m in methods if m not in aliases]
    return ", ".join(shown) + (f" (and {len(aliases)} family MTP aliases such as {aliases[0]})" if aliases else "")
