"""Names from a checkpoint are untrusted text: make them safe to print, without changing ordinary names.

A shard, tensor or module name can hold ESC sequences (clear the screen, set the window title,
fake colours), newlines that forge extra output lines, bidi overrides that display text in an
order other than the one it has, and lone surrogates that crash a UTF-8 writer. Reporters and
error lines pass every such string through here at the output boundary.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, line/paragraph separators, bidi marks, embeddings, overrides and
# isolates (the "Trojan Source" set), and lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# Multi-line bodies (a diff, a traceback) keep their line breaks and tab indentation.
_UNSAFE_IN_BODY = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What json.dumps leaves raw: it escapes C0 inside strings, and outside them C0 is only indentation.
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: object) -> str:
    """One terminal line: every unsafe character becomes a visible escape (`\\x1b`, `\\n`, `\\u202e`).

    Backslashes are left alone, so regex exclusion entries (`re:^model\\.layers\\.43\\.`) print as they are.
    """
    text = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_visible, text)


def terminal_safe_lines(text: object) -> str:
    """Like terminal_safe, but newlines and tabs stay (multi-line bodies: a diff, a traceback)."""
    text = text if isinstance(text, str) else str(text)
    return _UNSAFE_IN_BODY.sub(_visible, text)


def json_safe(dumped: str) -> str:
    """A json.dumps() result with every unsafe character that JSON leaves raw (DEL, C1, bidi, lone
    surrogates; C0 is escaped by json itself) written as a \\uXXXX escape: the same data, no raw control."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
