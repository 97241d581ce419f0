# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Training loops: the eval job (an agent trained by a fixed rule) and
meta-training (a population of agents training a rule).

Each loop is a config in, one jitted program out (`jax.jit` over a
`jax.sharding.Mesh` with `jax.shard_map`), metrics fetched once per call:

  config.py      the run settings (dataclasses), their checks, the agent
                 settings they describe, and the command-line flags made
                 from them
  devices.py     the mesh axis, the device picker, multi-process start-up
                 and placing host data on the mesh
  replay.py      the on-device FIFO replay buffer
  eval_setup.py  an eval run built from its config (devices, environment,
                 agent, rule)
  eval_program.py  the eval program as pure functions (init, act, store,
                 maybe learn, iteration, run), seeds in parallel
  eval_loop.py   the fused eval loop (jittable environments)
  host_eval_loop.py  the step-by-step one (host dm_env environments)
  eval_job.py    the eval job as the Trainer runs it (rows, summary, plots)
  meta_setup.py, meta_program.py, meta_loop.py, meta_job.py
                 the same for the population meta-training
  reporting.py   metrics CSV, plots and memory probes
"""
