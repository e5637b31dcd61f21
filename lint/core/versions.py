"""vLLM version ranges: PEP 440 specifiers over the version strings vLLM builds report."""

from __future__ import annotations

__version__ = "0.1.0"  # mtplint's own (pyproject.toml reads it from here)


def in_range(version: str, specifier: str) -> bool:
    """PEP 440 containment for a vLLM version string such as '0.29.0' or
    '0.30.0rc1.dev12+g1234abcd' (local build tags ignored, pre-releases included)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(str(version).split("+")[0])
    except InvalidVersion:
        return True  # an unparseable version: do not rule anything out
    return SpecifierSet(specifier).contains(v, prereleases=True)
