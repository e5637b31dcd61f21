# MTP025's case: an attention backend whose GPU-only package the probe's environment lacks.
--attention-backend FLASHINFER --speculative-config '{"method":"mtp","num_speculative_tokens":1}'
