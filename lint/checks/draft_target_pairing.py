"""Whether a separate draft belongs to its target: the token ids it proposes mean the same tokens
to the target (the tokenizer files both ship, the vocab_size of both configs), and the verifier a
speculators-format draft names is the target linted.

vLLM serves the draft with the target's tokenizer and never loads the draft's own, so its start-up
compares none of this: only `vocab_size` for method draft_model (config/speculative.py,
verify_equal_vocab_size_if_draft_model), and for a speculators draft served as the model itself,
that the verifier names a hub repository (transformers_utils/config.py). Evidence: the files
(basis "files"), read from both checkpoints."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.findings import Location
from ..inventory.model import Inventory
from ..inventory.tokenizer import SPECIAL_ROLES, Tokenizer, read_tokenizer
from . import check
from .context import Context, Hit

# What vLLM 0.33.0 itself checks of a pairing, stated beside each finding.
VLLM_CHECKS = (
    "vLLM {v} serves the draft with the target's tokenizer and compares only vocab_size, and only for "
    "method draft_model"
)
VLLM_VERIFIER = (
    "vLLM {v} never compares the verifier with --model: it reads it only when the draft itself is served as "
    "the model (and then refuses a local path: 'Speculators verifier must name a remote model repository')"
)
_EXAMPLES = 3  # differing ids quoted in a message
# A name_or_path written on the producer's machine: absolute, home-relative or relative.
_LOCAL_PATH = re.compile(r"^(/|~|\./|\.\./|[A-Za-z]:[\\/])")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class _Side:
    inventory: Inventory
    tokenizer: Tokenizer | None


@check(fields=("what", "problem", "vllm_checks"))
def draft_target_pairing(ctx: Context, options: None) -> list[Hit]:
    """Hits where the draft's vocabulary, special tokens, merges, vocab_size or verifier disagree
    with the target's (`ctx.target`, the target's inventory; None when no separate draft)."""
    target = ctx.target
    if not ctx.inputs.separate_draft or target is None:
        return []
    checks = VLLM_CHECKS.format(v=ctx.vllm_version)
    draft = _Side(ctx.inventory, _tokenizer(ctx, ctx.inventory))
    tgt = _Side(target, _tokenizer(ctx, target))
    hits = _vocabulary(draft, tgt, checks)
    if not any(h.severity in (None, "error") for h in hits):
        hits += _vocab_size(draft, tgt, checks)
    hits += _verifier(ctx, draft.inventory, target, VLLM_VERIFIER.format(v=ctx.vllm_version))
    return hits


def _tokenizer(ctx: Context, inventory: Inventory) -> Tokenizer | None:
    memo = ctx.memo("draft-target-pairing.tokenizer")
    key = str(inventory.root)
    if key not in memo:
        memo[key] = read_tokenizer(inventory.root)
    return memo[key]


def _location(side: _Side) -> Location:
    tok = side.tokenizer
    files = tok.files if tok else ()
    return Location(file=next((f for f in ("tokenizer.json", "vocab.json") if f in files), files[0] if files else ""))


def _vocabulary(draft: _Side, target: _Side, checks: str) -> list[Hit]:
    d, t = draft.tokenizer, target.tokenizer
    if d is None or t is None:
        return []  # nothing to compare: the draft runs on the target's ids as they are
    hits: list[Hit] = []
    if d.vocab is not None and t.vocab is not None:
        d_ids, t_ids = d.by_id, t.by_id
        shared = sorted(set(d_ids) & set(t_ids))
        differ = [i for i in shared if d_ids[i] != t_ids[i]]
        # Ids that are added tokens on both sides (chat and tool markers, reserved slots renamed
        # between releases, e.g. Llama-3 -> 3.1) leave ordinary text ids meaning the same.
        regular = [i for i in differ if not (i in d.added and i in t.added)]
        if differ:
            ordered = regular + [i for i in differ if i not in set(regular)]  # quote ordinary text first
            hits.append(_id_mismatch(d_ids, t_ids, shared, ordered, bool(regular), draft, d, t, checks))
            if regular:
                return hits
        roles = [
            (role, d.special_id(role), t.special_id(role))
            for role in SPECIAL_ROLES
            if d.special_id(role) is not None and t.special_id(role) is not None
        ]
        moved = [(role, a, b) for role, a, b in roles if a != b]
        if moved:
            said = ", ".join(f"{role} {a} in the draft's, {b} in the target's" for role, a, b in moved)
            hits.append(
                _warning(
                    "special-tokens",
                    "the draft's tokenizer",
                    f"the vocabularies agree id for id but name different special tokens ({said}): the draft was "
                    "trained to stop or pad on other ids than the target, so its proposals around them are rejected",
                    checks,
                    _location(draft),
                    {"special_ids": [{"role": r, "draft": a, "target": b} for r, a, b in moved]},
                )
            )
        if d.merges_digest and t.merges_digest and d.merges_digest != t.merges_digest:
            hits.append(
                _warning(
                    "merges",
                    "the draft's tokenizer",
                    "the vocabularies agree id for id but the BPE merges differ: the draft was trained on text "
                    "split into other tokens than the target produces, so fewer drafts are accepted",
                    checks,
                    _location(draft),
                    {"draft_files": list(d.files), "target_files": list(t.files)},
                )
            )
    for name in sorted(set(d.opaque) & set(t.opaque)):
        if d.opaque[name] != t.opaque[name]:
            hits.append(
                _warning(
                    f"opaque:{name}",
                    f"the draft's {name}",
                    f"not the target's {name} (compared by its bytes: its vocabulary was not read), so the "
                    "draft may number tokens differently from the target",
                    checks,
                    Location(file=name),
                    {"file": name},
                )
            )
    return hits


def _id_mismatch(
    d_ids: dict[int, str],
    t_ids: dict[int, str],
    shared: list[int],
    differ: list[int],
    regular: bool,
    draft: _Side,
    d: Tokenizer,
    t: Tokenizer,
    checks: str,
) -> Hit:
    quoted = ", ".join(f"id {i} is {d_ids[i]!r} to the draft, {t_ids[i]!r} to the target" for i in differ[:_EXAMPLES])
    if regular:
        problem = (
            f"{len(differ):,} of the {len(shared):,} token ids both vocabularies hold name different tokens "
            f"({quoted}): the draft proposes ids the target reads as other tokens, so drafts are rejected "
            "(near-zero acceptance) or, where a mapped id is accepted, the output is not what the draft meant "
            "(sglang #24051, #23838)"
        )
    else:
        problem = (
            f"{len(differ):,} added-token ids (special or reserved) name different tokens ({quoted}); the "
            "ordinary vocabulary agrees id for id: the draft was trained where those ids meant other markers, "
            "so its proposals around them are rejected"
        )
    return Hit(
        key="vocabulary" if regular else "added-tokens",
        fields={"what": "the draft's tokenizer", "problem": problem, "vllm_checks": checks},
        location=_location(draft),
        evidence={
            "differing_ids": len(differ),
            "shared_ids": len(shared),
            "first_differing": [{"id": i, "draft": d_ids[i], "target": t_ids[i]} for i in differ[:_EXAMPLES]],
            "draft_files": list(d.files),
            "target_files": list(t.files),
        },
        severity=None if regular else "warning",
        basis="files",
    )


def _warning(key: str, what: str, problem: str, checks: str, location: Location, evidence: dict[str, Any]) -> Hit:
    return Hit(
        key=key,
        fields={"what": what, "problem": problem, "vllm_checks": checks},
        location=location,
        evidence=evidence,
        severity="warning",
        basis="files",
    )


def _vocab_size(draft: _Side, target: _Side, checks: str) -> list[Hit]:
    d, t = _declared_vocab_size(draft.inventory.config), _declared_vocab_size(target.inventory.config)
    if d is None or t is None or d == t:
        return []
    return [
        Hit(
            key="vocab_size",
            fields={
                "what": "the draft's config.json",
                "problem": (
                    f"vocab_size {d} is not the target's {t}: the draft's embedding and head number tokens "
                    f"over another vocabulary, so ids past {min(d, t) - 1} are out of range for one side "
                    "(a device-side assert) and the rest may name other tokens"
                ),
                "vllm_checks": checks,
            },
            location=Location(file=draft.inventory.config_path.name, config_key="vocab_size"),
            evidence={"draft_vocab_size": d, "target_vocab_size": t},
            basis="files",
        )
    ]


def _declared_vocab_size(config: dict[str, Any]) -> int | None:
    # As vLLM's ModelConfig.get_vocab_size reads it (the text config's): a multimodal target keeps
    # its language model's under text_config, a speculators draft its layer's under
    # transformer_layer_config; the top level only where neither is there.
    for holder in (config.get("text_config"), config.get("transformer_layer_config"), config):
        if isinstance(holder, dict):
            value = holder.get("vocab_size")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _verifier(ctx: Context, draft: Inventory, target: Inventory, checks: str) -> list[Hit]:
    spec = draft.config.get("speculators_config")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    if not isinstance(verifier, dict):
        return []
    name = verifier.get("name_or_path")
    location = Location(file=draft.config_path.name, config_key="speculators_config.verifier")
    hub = _hub_target(ctx.inputs.target or "")
    hits: list[Hit] = []
    if isinstance(name, str) and _LOCAL_PATH.match(name):
        hits.append(
            Hit(
                key="verifier-local-path",
                fields={
                    "what": "the draft's speculators_config.verifier",
                    "problem": (
                        f"{name!r} is a path on the machine the draft was trained on, not a "
                        "model id: the draft does not say which target it was trained against, so only its "
                        "tokenizer and vocab_size, compared with the target's, stand for the pairing"
                    ),
                    "vllm_checks": checks,
                },
                location=location,
                evidence={"verifier": verifier},
                severity="info",
                basis="files",
            )
        )
    elif isinstance(name, str) and hub is not None and name.lower() != hub[0].lower():
        hits.append(
            _warning(
                "verifier-name",
                "the draft's speculators_config.verifier",
                f"{name!r} is not the target linted, {hub[0]}: the draft was "
                "trained against another model, whose hidden states and tokens it expects",
                checks,
                location,
                {"verifier": verifier, "target": hub[0]},
            )
        )
    revision = verifier.get("revision")
    if (
        isinstance(name, str)
        and hub is not None
        and name.lower() == hub[0].lower()
        and isinstance(revision, str)
        and _COMMIT.match(revision)
        and hub[1]
        and revision != hub[1]
    ):
        hits.append(
            _warning(
                "verifier-revision",
                "the draft's speculators_config.verifier",
                f"trained against revision {revision[:12]} of {hub[0]}, the target linted is at "
                f"{hub[1][:12]}: a target whose weights were replaced since no longer produces the hidden "
                "states the draft was trained on (vllm #54780)",
                checks,
                location,
                {"verifier": verifier, "target_revision": hub[1]},
            )
        )
    archs = [a for a in verifier.get("architectures") or [] if isinstance(a, str)]
    target_archs = [a for a in target.config.get("architectures") or [] if isinstance(a, str)]
    if archs and target_archs and not set(archs) & set(target_archs):
        hits.append(
            _warning(
                "verifier-architectures",
                "the draft's speculators_config.verifier",
                f"architectures {', '.join(archs)} are not the target's, "
                f"{', '.join(target_archs)}: the draft was trained against another model",
                checks,
                location,
                {"verifier_architectures": archs, "target_architectures": target_archs},
            )
        )
    return hits


def _hub_target(target: str) -> tuple[str, str | None] | None:
    """(ORG/NAME, commit) of a hub target as the lint records it (hf://ORG/NAME@COMMIT); None for a
    local directory, whose hub name is unknown."""
    if not target.startswith("hf://"):
        return None
    name, _, commit = target.removeprefix("hf://").partition("@")
    return name, commit or None
