"""A rule as loaded from its declarative file in rules/ (one TOML file per rule)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Explanation:
    what: str  # what the rule checks
    why: str  # what breaks and why
    example: str  # a concrete failing case
    fix: str  # how to fix it (artifact side and runtime side)


@dataclass
class Rule:
    code: str  # stable code, "MTP002"
    name: str  # readable kebab-case name, "quantized-layer-fed-unquantized"
    severity: str  # default severity: error | warning | info
    summary: str  # one line
    explanation: Explanation
    check: str  # name of the check function in mtplint.checks
    options: dict[str, Any] = field(default_factory=dict)
    message: str = ""  # message template, str.format()-ed with the check's fields
    references: list[str] = field(default_factory=list)  # upstream issues / PRs (URLs)
    fixes: dict[str, list[str]] = field(default_factory=lambda: {"patches": [], "artifact": []})
    applies_to: dict[str, Any] = field(default_factory=dict)  # {architectures, quant_methods, vllm}
    source_file: str = ""

    @property
    def help_uri(self) -> str:
        return f"https://mtplint.dev/rules/{self.code}"
