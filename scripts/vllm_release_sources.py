#!/usr/bin/env python3
"""Grep the Python sources of released vLLM wheels without downloading them: HTTP range
requests read each wheel's zip directory and only the members asked for. This is how the
version ranges of knowledge-table rules (MTP010) are established and re-checked.

    scripts/vllm_release_sources.py --member deepseek_v4 --grep 'wo_a\\.weight_scale' 0.20.0 0.29.0 0.30.0

prints, per release, every matching line as `path:line: text`.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import urllib.request
import zipfile

INDEX = "https://pypi.org/simple/vllm/"


class RangeReader(io.RawIOBase):
    """A seekable read-only file over an HTTP URL that serves byte ranges."""

    def __init__(self, url: str):
        self.url = url
        head = urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60)
        self.size = int(head.headers["Content-Length"])
        self.pos = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self.pos >= self.size or not len(buffer):
            return 0
        end = min(self.pos + len(buffer), self.size) - 1
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        data = urllib.request.urlopen(request, timeout=60).read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def wheel_url(version: str, index_html: str) -> str:
    pattern = r'href="([^"#]*/vllm-' + re.escape(version) + r'-[^"#]*x86_64[^"#]*\.whl)'
    found = re.findall(pattern, index_html)
    if not found:
        raise SystemExit(f"vllm {version}: no x86_64 wheel on {INDEX}")
    return found[0]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--member", required=True, help="substring of the wheel member paths to read")
    ap.add_argument("--grep", required=True, help="regex searched line by line")
    args = ap.parse_args(argv)
    index_html = urllib.request.urlopen(INDEX, timeout=60).read().decode()
    needle = re.compile(args.grep)
    for version in args.versions:
        wheel = zipfile.ZipFile(io.BufferedReader(RangeReader(wheel_url(version, index_html)), 1 << 20))
        members = sorted(n for n in wheel.namelist() if args.member in n and n.endswith(".py"))
        print(f"== vllm {version}: {len(members)} member(s) matching {args.member!r}")
        for name in members:
            for lineno, line in enumerate(wheel.read(name).decode(errors="replace").splitlines(), 1):
                if needle.search(line):
                    print(f"{name}:{lineno}: {line.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
