"""The environment a probe child and a probe worker are given: mtplint's own, less what the
libraries mtplint imports wrote into it.

torch writes `TORCHINDUCTOR_CACHE_DIR` into os.environ the first time it computes its default
cache directory (torch/_inductor/runtime/cache_dir_utils.py), which importing compressed-tensors
does while the declared quantization is validated. Passed on, it would make the lint of a
compressed-tensors checkpoint ask for another probe worker than the lint of any other (the
worker's identity includes the variables vLLM reads at import), and hand the child a cache
directory outside its own temporary directory. The values these variables had when mtplint
started are kept; one its imports set is dropped. Secrets (a hub token, the cache secret, and
any variable named as a credential: *_TOKEN, *_SECRET*, *_API_KEY, *PASSWORD*, ...) are never
passed on: every child that touches a checkpoint (the probe, its workers, verify's engine) runs
vLLM's and, with --trust-remote-code, the checkpoint's own code.
"""

from __future__ import annotations

import os
import re

WRITTEN_BY_IMPORTS = ("TORCHINDUCTOR_CACHE_DIR",)
# The probe never talks to the hub (a hub checkpoint's files are staged for it): a token has no
# business in a child that runs vLLM's and the checkpoint's code, nor in a worker kept alive.
HUB_SECRETS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "MTPLINT_CACHE_SECRET")
# A credential by its name's words (AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, OPENAI_API_KEY,
# GOOGLE_APPLICATION_CREDENTIALS), not a substring: TOKENIZERS_PARALLELISM is no token.
_CREDENTIAL = re.compile(r"(?:^|_)(?:TOKEN|SECRET|API_?KEY|ACCESS_KEY|CREDENTIALS?|AUTH)(?:_|$)|PASSW(?:OR)?D")
# Read when the mtplint package is imported (lint/__init__.py), before any of those imports.
AT_START = {name: os.environ.get(name) for name in WRITTEN_BY_IMPORTS}


def child_environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not is_secret(k)}
    for name, value in AT_START.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def is_secret(name: str) -> bool:
    return name in HUB_SECRETS or _CREDENTIAL.search(name.upper()) is not None
