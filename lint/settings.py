"""Options from the command line, `mtplint.toml` beside the checkpoint, or `[tool.mtplint]`
in the working directory's pyproject.toml (in that order of precedence)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .errors import BadInput

DEFAULTS: dict[str, Any] = {
    "num_speculative_tokens": 1,
    "gpu": None,
    "sm": None,
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "kv_cache_dtype": None,
    "formats": (),
    "outputs": (),
    "select": None,
    "ignore": None,
    "fail_on": "error",
    "with_patches": None,
    "probe_timeout": 600.0,
    "no_cache": False,
    "quiet": False,
    "debug": False,
    "vllm_commit": None,
    "vllm_python": None,
}
FILE_KEYS = {
    "num-speculative-tokens": "num_speculative_tokens",
    "gpu": "gpu",
    "sm": "sm",
    "tensor-parallel-size": "tensor_parallel_size",
    "pipeline-parallel-size": "pipeline_parallel_size",
    "kv-cache-dtype": "kv_cache_dtype",
    "select": "select",
    "ignore": "ignore",
    "fail-on": "fail_on",
    "with-patches": "with_patches",
    "probe-timeout": "probe_timeout",
    "vllm-commit": "vllm_commit",
    "vllm-python": "vllm_python",
    "trust-remote-code": "trust_remote_code",
}


def _from_files(path: Path) -> tuple[dict[str, Any], str | None]:
    for candidate, table in (
        (path / "mtplint.toml", None),
        (Path("mtplint.toml"), None),
        (Path("pyproject.toml"), ("tool", "mtplint")),
    ):
        if not candidate.is_file():
            continue
        try:
            data = tomllib.loads(candidate.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise BadInput(f"invalid TOML: {exc}", path=str(candidate)) from None
        if table:
            data = data.get(table[0], {}).get(table[1])
            if data is None:
                continue
        unknown = sorted(set(data) - set(FILE_KEYS))
        if unknown:
            raise BadInput(
                f"unknown option(s) {', '.join(unknown)}; known: {', '.join(FILE_KEYS)}", path=str(candidate)
            )
        return {FILE_KEYS[k]: v for k, v in data.items()}, str(candidate)
    return {}, None


def _codes(value: Any) -> list[str] | None:
    if value is None:
        return None
    items = value if isinstance(value, list) else str(value).split(",")
    return [c.strip().upper() for c in items if c.strip()]


def load_settings(path: Path, cli: dict[str, Any]) -> dict[str, Any]:
    from_file, source = _from_files(path)
    s = dict(DEFAULTS)
    s.update(from_file)
    s.update({k: v for k, v in cli.items() if v not in (None, (), False)})
    s["select"], s["ignore"] = _codes(s.get("select")), _codes(s.get("ignore_codes") or s.get("ignore"))
    s["patches"] = (
        [p.strip() for p in (s.get("with_patches") or "").split(",") if p.strip()]
        if not isinstance(s.get("with_patches"), list)
        else s["with_patches"]
    )
    s["settings_file"] = source
    return s
