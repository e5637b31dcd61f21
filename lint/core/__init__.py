"""Small shared pieces every layer may use: findings, errors and exit codes, versions, the MTP layout
naming, terminal-safe text, cache directories, progress and exit handling. Imports nothing else of mtplint."""
