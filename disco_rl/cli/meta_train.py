# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-trains an update rule with a population of agents: on Catch, or
split over a suite of tasks (`--tasks`, any registered environments).

  disco-rl meta-train --steps 800 --out runs/meta_train

Prints progress, then the positive rewards per meta-step over the last 100
steps, meta-steps per second, compile time, and the output paths (metrics CSV,
plots, and the learned parameters in the disco_103.npz layout, also written
when the run is interrupted). Every setting of `MetaTrainConfig` is a flag
(`--help` lists them); `--preset paper` starts from the paper's
meta-optimisation (per-agent Adam normalisation, 20 updates per
meta-gradient with rematerialisation, clipping, agent lifetimes), `--preset
lpg` from LPG's recipe as GROOVE runs it (tabular agents on gridworlds, K=5
updates per meta-step, lifetimes drawn per agent, LPG's prediction size),
`--preset lpg_actor` from the recipe of issue 69 on those gridworlds
(LPG's actor term as the policy target, GROOVE's SGD agents and
meta-optimiser); `--resume DIR` continues an interrupted run.
"""

import sys

from disco_rl.runtime import signals

signals.catch_from_here(__name__)  # The rule for signals, from this line on.

# pylint: disable=g-import-not-at-top,wrong-import-position
from disco_rl.cli import common
from disco_rl.jobs.meta import config as meta_config
from disco_rl.update_rules import disco

# Named starting points (`--preset`); flags given override them, e.g.
# `MetaTrainConfig(**PRESETS['paper'], num_agents=2)` from Python.
PRESETS = {
  # The upstream meta-training notebook (the MetaTrainConfig defaults).
  'notebook': {},
  # The paper's meta-optimisation (Oh et al. 2025, Methods): Adam
  # normalisation per agent, meta learning rate 1e-3 with clipping 1.0,
  # backpropagation through 20 agent updates, 96 trajectories of 29 steps
  # per agent update. The population size and lifetime are this project's
  # choice for Catch on a small machine (the paper's is far larger).
  'paper': dict(
    meta_grad_norm='per_agent_adam',
    meta_learning_rate=1e-3,
    meta_grad_clip=1.0,
    num_inner_steps=20,
    remat=True,
    batch_size_per_device=96,
    rollout_len=29,
    num_agents=8,
    agent_lifetime=2000,
  ),
  # LPG's recipe (Oh et al. 2020) after GROOVE (Jackson et al. 2023,
  # EmptyJackson/groove: experiments/parse_args.py, models/optim.py,
  # agents/lpg_agent.py, the 'all_vrandlife' mode of
  # environments/gridworld/configs.py), at this project's scale (issue 54).
  # Taken from GROOVE: GROOVE's 'all' gridworlds, each agent in its own
  # layout, tabular agents; 64 environments per agent, rollouts of 20, K=5
  # agent updates per meta-step; lifetimes drawn per agent at each
  # (re)start, log-uniformly from 10 to 250 updates (GROOVE's 250 // 25 to
  # 250). Not GROOVE's (issue 69): the meta-optimiser (here each agent's
  # meta-gradient clipped at 0.5 and normalised by its own Adam, the
  # paper's meta learning rate 1e-3; GROOVE averages the meta-gradient over
  # its 512 agents and takes one Adam step of 1e-4, unclipped: its 0.5 clip
  # is its agents' SGD's); the agents' optimiser (this job's Adam at 3e-2, a
  # rate their tables learn at within a lifetime: an actor-critic's final
  # return after 250 updates on lpg:all layout 1 is 0.21-0.25 at the job's
  # default 5e-4 and 0.70-0.74 at 3e-2, and at 5e-4 a meta-training of
  # 3,300 meta-steps never left the uniform policy,
  # docs/studies/lpg_transfer.md; GROOVE's take SGD steps of 40, the
  # critic's 4, clipped at 0.5); the meta-objective (Disco's: the updated
  # agent's policy gradient on a fresh rollout with advantages of this
  # job's value function, and Disco's four regularisers; GROOVE's takes
  # GAE(0.99, 0.95) from a per-agent critic, entropy 5e-2, target entropy
  # 1e-3, L2 of pi_hat 5e-3 and of y 1e-3); the rule (Disco's meta-network
  # and its absolute KL policy target at LPG's 8 prediction categories;
  # LPG's actor term is log pi(a_t) * pi_hat_t, a scalar per step). The
  # population: 8 agents fit this project's 2-core CPU (GROOVE: 512).
  # The agents are tables ('table': a row per state) with the Disco
  # agent's other parts kept small (GROOVE's tabular agents have none):
  # an action model of 8 and a value network of 16 units; at the MLP
  # defaults (256-unit action model, 256x256 value network on the one-hot
  # state) those parts, not the tables, would cost most of a meta-step.
  'lpg': dict(
    tasks=('lpg:all[layout_seed=-1,net=table]',),
    model_lstm_size=8,
    model_head_hiddens=(8,),
    value_dense=(16,),
    batch_size_per_device=64,
    rollout_len=20,
    num_inner_steps=5,
    meta_grad_norm='per_agent_adam',
    meta_grad_clip=0.5,
    learning_rate=3e-2,
    meta_learning_rate=1e-3,
    lifetime_sampling='log_uniform',
    min_agent_lifetime=10,
    agent_lifetime=250,
    rule_sizes=dict(prediction_size=8),
    num_agents=8,
  ),
}
# The recipe of issue 69 that leaves the uniform target and teaches
# (docs/studies/lpg_transfer.md: the arms ACT_SGD_GROOVE_L2_0.25_L1000 and
# ACT_PG_SGD_GROOVE_L2_0.25_L1000): the lpg preset's agents and gridworlds
# with LPG's actor term as the policy target ('action_pg', the action
# head's scalar over pi(a_t), whose mean step for a constant scalar is 0;
# 'action', without the division, narrows policies where no reward comes)
# at the 'tiny' rule's sizes; GROOVE's agents (plain SGD steps of 40,
# clipped at 0.5) and meta-optimiser (the meta-gradient averaged over the
# agents, one Adam step of 1e-4, LPG's entropy bonus 5e-2); 50 times
# GROOVE's L2 on the actor target (0.25: at 5e-3 the rule collapsed its
# agents); lifetimes from 40 to 1,000 updates (to 250 the rule stopped
# its agents past 250); 16 environments per agent (the cost of a
# meta-step here). Not GROOVE's: the meta-objective's advantages (this
# job's value function) and Disco's other regularisers; the population (8
# agents, GROOVE 512).
PRESETS['lpg_actor'] = dict(
  PRESETS['lpg'],
  rule_sizes=disco.NAMED_SIZES['tiny'].changes(),
  policy_target='action_pg',
  agent_optimizer='sgd',
  learning_rate=40.0,
  batch_size_per_device=16,
  meta_grad_norm='average',
  meta_learning_rate=1e-4,
  meta_entropy_cost=5e-2,
  meta_action_l2_cost=0.25,
  min_agent_lifetime=40,
  agent_lifetime=1000,
)


def _report(summary) -> None:
  final = summary['final_pos_rewards']
  print(
    'positive rewards per meta-step (last 100): '
    + (f'{final:.1f}' if final is not None else 'none (no meta-step ran)')
  )
  print(
    common.speed_line(
      'meta-step',
      summary['meta_steps_per_second'],
      summary['compile_s'],
      'compilation',
      digits=3,
    )
  )
  print(f'metrics: {summary["metrics_csv"]}')
  print(f'rule:    {summary["params_npz"]}')


def _weights_unusable(config) -> str | None:
  if config.init == 'disco_103':
    return None
  return (
    '--weights is the rule to fine-tune: it needs --init disco_103, '
    f'got --init {config.init}.'
  )


# The command as `python -m` runs it (`disco-rl meta-train` passes its own).
PROG = 'python -m disco_rl.cli.meta_train'

# The command: main(argv=None, prog=None) -> exit status.
main = common.command(
  description=__doc__.split('\n\n')[0],
  config_cls=meta_config.MetaTrainConfig,
  default_out='runs/meta_train',
  weights_help='with --init disco_103: the rule to fine-tune '
  "(disco_103.npz or a previous run's update_rule_params.npz; "
  'default: Disco103)',
  weights_unusable=_weights_unusable,
  report=_report,
  presets=PRESETS,
  prog=PROG,
)


if __name__ == '__main__':
  sys.exit(main())
