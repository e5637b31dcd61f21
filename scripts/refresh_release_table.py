#!/usr/bin/env python3
"""Rebuild lint/envs/releases.json, the release -> commit table `--vllm-commit` resolves
commit ids with (no network at lint time). Each released x86_64 wheel records the commit
it was built from in `vllm/_version.py`; that one member is read over HTTP range requests
(scripts/vllm_release_sources.py), so no wheel is downloaded.

    scripts/refresh_release_table.py                # every final release >= 0.10.0
    scripts/refresh_release_table.py 0.34.0 0.34.1  # add or refresh these
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import urllib.request
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_release_sources import INDEX, RangeReader, wheel_url

TABLE = Path(__file__).resolve().parent.parent / "lint" / "envs" / "releases.json"
OLDEST = (0, 10, 0)  # older wheels record no commit id
_COMMIT = re.compile(r"__commit_id__\s*=\s*(?:commit_id\s*=\s*)?['\"]([^'\"]+)['\"]")


def final_releases(index_html: str) -> list[str]:
    found = set(re.findall(r"/vllm-(\d+\.\d+\.\d+(?:\.post\d+)?)-[^\"#]*x86_64[^\"#]*\.whl", index_html))
    return sorted((v for v in found if _key(v) >= OLDEST), key=_key)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def commit_of(version: str, index_html: str) -> str | None:
    wheel = zipfile.ZipFile(io.BufferedReader(RangeReader(wheel_url(version, index_html)), 1 << 16))
    try:
        text = wheel.read("vllm/_version.py").decode()
    except KeyError:
        return None
    m = _COMMIT.search(text)
    return m.group(1).lower().removeprefix("g") if m else None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", nargs="*", help="releases to (re)read; default: every final release on PyPI")
    args = ap.parse_args(argv)
    index_html = urllib.request.urlopen(INDEX, timeout=60).read().decode()
    table = json.loads(TABLE.read_text())["releases"] if TABLE.exists() else {}
    for version in args.versions or final_releases(index_html):
        if version in table and not args.versions:
            continue
        commit = commit_of(version, index_html)
        print(f"{version}: {commit}", file=sys.stderr)
        if commit:
            table[version] = commit
    doc = {
        "about": "vLLM release -> the commit its wheel was built from (vllm/_version.py, short id without "
        "the leading g); written by scripts/refresh_release_table.py",
        "releases": dict(sorted(table.items(), key=lambda kv: _key(kv[0]))),
    }
    TABLE.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
