"""`mtplint matrix PATH --vllm-commit A,B [-n 1,2,3] [--gpu h100,b200] [--tp 1,8]`: every
combination of vLLM and deployment inputs linted, in one report (run.py: the cells;
render.py: text table, JSON, JUnit; command.py: the CLI)."""
