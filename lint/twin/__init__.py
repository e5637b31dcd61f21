"""Twins: tiny real-weight copies of a checkpoint that a CPU vLLM can serve with MTP.

A twin keeps what decides loading and wiring (config structure, tensor names, on-disk formats
and dtypes, exclusion lists, the MTP layers as shipped, the shard layout) and shrinks what does
not (layer count, hidden sizes, vocabulary). Its values follow a deterministic acceptance
construction (`values.py`): a correctly wired MTP draft proposes exactly the target's token
(acceptance 1.0), a missing or mis-loaded one another token (acceptance 0.0).
"""
