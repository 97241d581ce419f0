# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The rule meta-trained here (stage 2 of docs/studies/meta_suite.md)
against Disco103 and the actor-critic on environments it never saw, each
rule's learning rate chosen on the meta-training suite, in two settings.

  disco-rl study studies/learned_rule.py \
      --out runs/learned_rule           # about 12 hours on 2 CPU cores
  disco-rl study studies/learned_rule.py \
      --out docs/results/learned_rule --report   # the committed report
  disco-rl study studies/learned_rule.py \
      --out runs/learned_rule_tiny --tiny        # test size

The two settings are two pairs of stages, each pair a tuning stage on the
suite and a held-out stage at the rates it chose: 'eval', the eval job's
agents (128x128 MLP, batches of 32 trajectories of 29 steps, replay ratio
16); 'meta', the agents the rule was meta-trained with (512x512 MLP, 32
environments x 16-step rollouts, one learner step per acted batch). A
setting is a stage's `settings`, so one spec holds both, and each setting's
rates are chosen on its own tuning runs and normalised within its own
stages. docs/studies/learned_rule.md reports it.
"""

from disco_rl.studies.spec import RatePick
from disco_rl.studies.spec import Rule
from disco_rl.studies.spec import Stage
from disco_rl.studies.spec import Study

# The learned rule's parameters (the disco_103.npz layout), committed; the
# meta-training commands that made it are in docs/studies/learned_rule.md.
# Relative to this file's folder.
LEARNED = '../docs/results/meta_suite_cpu/stage2/update_rule_params.npz'
# The meta-training suite (the rates are chosen here) and the held-out
# environments (never seen by the rule, never used to choose a rate). Catch
# is the compiled Catch, as in meta-training.
SUITE = (
  'jittable_catch[rows=5,columns=5]',
  'jittable_catch[rows=7,columns=5]',
  'gymnax:CartPole-v1',
)
HELD_OUT = (
  'jittable_catch[rows=8,columns=8]',
  'gymnax:Catch-bsuite',
  'gymnax:Acrobot-v1',
)
RATES = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
TUNE_SEEDS = (100, 101, 102)  # Apart from the reported seeds.
SEEDS = (0, 1, 2)
STEPS = 3000  # Learner steps per run, tuning and held-out alike.
SETTINGS = {
  # The eval job's agents, smaller than its notebook's (512x512 MLP,
  # 64 trajectories) to fit a small machine.
  'eval': dict(
    batch_size=32,
    replay_ratio=16,
    buffer_capacity=512,
    rollout_len=29,
    dense=(128, 128),
    model_lstm_size=64,
    model_head_hiddens=(64,),
  ),
  # The meta-training agents (the upstream notebook's): one learner step
  # per acted batch of 32 environments, from a buffer of that batch.
  'meta': dict(
    batch_size=32,
    replay_ratio=1,
    buffer_capacity=32,
    rollout_len=16,
    dense=(512, 512),
    model_lstm_size=256,
    model_head_hiddens=(256,),
  ),
}


def _stages(setting: str) -> tuple[Stage, Stage]:
  tune = f'tune_{setting}'
  return (
    Stage(
      tune,
      envs=SUITE,
      seeds=TUNE_SEEDS,
      rates=RATES,
      num_steps=STEPS,
      settings=SETTINGS[setting],
    ),
    Stage(
      f'held_out_{setting}',
      envs=HELD_OUT,
      seeds=SEEDS,
      rates=RatePick(tune),
      num_steps=STEPS,
      settings=SETTINGS[setting],
    ),
  )


STUDY = Study(
  name='learned_rule',
  base=dict(net='mlp', steps_per_call=50, debug_checks=False),
  rules=(
    Rule('disco_103', name='learned', weights=LEARNED),
    Rule('disco_103'),
    Rule('actor_critic'),
  ),
  stages=(*_stages('eval'), *_stages('meta')),
  baseline='actor_critic',
  # --tiny: the same grid at test size.
  tiny=dict(
    num_steps=20,
    batch_size=8,
    replay_ratio=2,
    buffer_capacity=16,
    rollout_len=5,
    dense=(16,),
    model_lstm_size=8,
    model_head_hiddens=(8,),
    steps_per_call=10,
  ),
)
