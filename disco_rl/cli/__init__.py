# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The commands, installed as the `disco-rl` console script (`main`).

One module per command, each also `python -m disco_rl.cli.MODULE`:
`eval` (an agent trained with a fixed rule), `meta_train` (a rule
meta-trained), `study` (rules compared, with a report), `export_rule` (a
run's rule at a checkpoint) and `probe_rule` (the meta-gradient at a
rule); their shared flow and errors (`common`) and the flags made from a
config's fields (`flags`).
"""
