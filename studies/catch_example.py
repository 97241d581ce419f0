# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A small complete study: actor-critic and PPO on Catch, each rule's rate
chosen on two small boards, then compared on the 8x8 board they were not
tuned on.

  disco-rl study studies/catch_example.py \
      --out runs/catch_example          # about 10 minutes on 2 CPU cores
  disco-rl study studies/catch_example.py \
      --out runs/catch_example --tiny   # test size: about a minute

docs/studies/README.md walks through it.
"""

from disco_rl.studies.spec import RatePick
from disco_rl.studies.spec import Rule
from disco_rl.studies.spec import Stage
from disco_rl.studies.spec import Study

STUDY = Study(
  name='catch_example',
  # EvalConfig fields of every cell: a small agent, 4 environments.
  base=dict(
    batch_size=16,
    replay_ratio=4,
    buffer_capacity=64,
    rollout_len=10,
    dense=(32,),
    model_lstm_size=16,
    model_head_hiddens=(16,),
    steps_per_call=25,
  ),
  rules=(Rule('actor_critic'), Rule('ppo')),
  stages=(
    # Tuning: every rule at every rate, on boards not in the comparison.
    Stage(
      'tune',
      envs=(
        'jittable_catch[rows=5,columns=5]',
        'jittable_catch[rows=6,columns=4]',
      ),
      seeds=(100, 101),
      rates=(3e-3, 1e-2),
      num_steps=400,
    ),
    # The comparison: each rule at the rate tuning chose for it.
    Stage(
      'held_out',
      envs=('jittable_catch[rows=8,columns=8]',),
      seeds=(0, 1, 2),
      rates=RatePick('tune'),
      num_steps=600,
    ),
  ),
  baseline='actor_critic',
  # --tiny: the same grid at test size.
  tiny=dict(
    num_steps=20,
    batch_size=8,
    replay_ratio=2,
    buffer_capacity=16,
    steps_per_call=10,
  ),
)
