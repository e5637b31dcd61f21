"""The lint pipeline: preflight, inventory, probe, rule checks and policy, for a target with its draft,
reference and serve command. Knows nothing of the command line."""
