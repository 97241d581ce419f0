# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The jobs the runtime runs, one folder each, and what serves both.

eval/        an agent trained by a fixed rule (`make_eval(config) -> Job`)
meta/        a population of agents training a rule
             (`make_meta_train(config) -> Job`)
config.py    the settings of both jobs (shared fields declared once),
             checked once when made
trainer.py   `Trainer`: fit / evaluate / save / restore over either job
records.py   a run's recorded settings read as today's config (upgrades,
             a resumed run's config)
"""
