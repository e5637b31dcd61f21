"""Probe environments: the vLLM a lint probes, named by release or commit, provisioned on
first use into the user cache and reused after (`mtplint env list|add|remove|prune`).

An environment is a directory holding one vLLM (a release's wheel, or a source tree at a
commit) and the pure-Python modules that vLLM imports and the pinned one does not; it runs
on mtplint's own interpreter, which supplies the CPU torch build and vLLM's common
dependencies (scripts/setup.sh). The pinned release is the default environment.
"""
