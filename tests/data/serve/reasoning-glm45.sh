# MTP025's cases: a reasoning parser (built over the checkpoint's tokenizer at start-up) and tool
# parsers (frontend only), as the GLM-4.x recipes write them.
--speculative-config '{"method":"mtp","num_speculative_tokens":1}' --reasoning-parser glm45 --tool-call-parser glm45 --enable-auto-tool-choice
