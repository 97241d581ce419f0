# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Training: two jobs, one host loop, one Trainer.

config.py     the settings of both jobs (shared fields declared once),
              checked once when made; the meta-training task suite
eval.py       make_eval(config) -> Job: an agent trained by a fixed rule
meta.py       make_meta_train(config) -> Job: a population training a rule
compiled.py   the one builder of jit(shard_map(scan(step)))
run.py        Job, and run(job, ...): the host loop
trainer.py    Trainer: fit / evaluate / save / restore over any Job
run_dir.py    a run's directory: its files, checks, record, checkpoints
mesh.py       devices, the mesh, placing and fetching, processes
replay.py, divergence.py
              the replay buffer, the check for diverged learning
"""
