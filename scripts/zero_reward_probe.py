# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a rule of an action target does to fresh agents where no reward
comes (issue 69, docs/studies/lpg_transfer.md).

Fresh table agents of gate G1 (`studies/lpg_gridworlds_l1000.py`'s
settings) are trained by three versions of one rule file, and the script
prints, per block of updates, their policy's entropy, the policy target's,
the action head's mean scalar over the steps of reward 0, and the return:

- `rule`: the file as it is, with its policy target ('action');
- `constant`: the same rule with its action head's last layer replaced by
  the constant `--constant` (weights 0, bias c): every step's scalar is c;
- `constant_pg`: that constant under policy target 'action_pg' (the
  scalar over pi(a_t)), whose mean step of the logits is 0.

  python scripts/zero_reward_probe.py \\
      docs/results/lpg_transfer/l1000/rule_step_6000.npz \\
      --envs lpg:sparse lpg:dense --updates 500 --rate 10 \\
      --csv docs/results/lpg_transfer/g1_l1000/zero_reward_probe.csv

If `constant` narrows the policy as the rule does and `constant_pg` does
not, a positive scalar at zero reward is the narrowing force, through the
factor pi(a_t) of the 'action' target's step.
"""

import argparse
import pathlib
import runpy
import sys

import numpy as np
import pandas as pd

from disco_rl import weights
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.trainer import Trainer
from disco_rl.update_rules import disco

_STUDY = pathlib.Path(__file__).parents[1] / 'studies'
ARMS = ('rule', 'constant', 'constant_pg')
COLUMNS = (
  'avg_return',
  'entropy',
  'pi_hat_entropy',
  'pi_action',
  'pi_action_unrewarded',
  'unrewarded',
  'normalized_adv_abs',
)


def with_constant_head(params: dict, value: float) -> dict:
  """The rule `params` with its action head's output the constant
  `value` on every step (its last layer's weights 0, its bias `value`)."""
  head = params['lstm/linear_5']
  return dict(
    params,
    **{
      'lstm/linear_5': dict(
        w=np.zeros_like(head['w']), b=np.full_like(head['b'], value)
      )
    },
  )


def arm_config(
  env: str, arm: str, updates: int, rate: float, seeds: list[int]
) -> config_lib.EvalConfig:
  """G1's eval settings for one arm on `env` (the study's, read from it)."""
  study = runpy.run_path(str(_STUDY / 'lpg_gridworlds_l1000.py'))
  settings = dict(study['BASE'], **study['RULE_SETTINGS'])
  if arm == 'constant_pg':
    settings['policy_target'] = 'action_pg'
  settings.update(
    rule='disco_103',
    env=env,
    num_steps=updates,
    learning_rates=(rate,),
    seeds=tuple(seeds),
    steps_per_call=min(updates, settings['steps_per_call']),
  )
  return config_lib.EvalConfig(**settings)


def run_arm(
  rule: dict, env: str, arm: str, args: argparse.Namespace
) -> pd.DataFrame:
  """The per-update rows of one arm on `env` (all seeds), with a line
  about every fifth of its updates."""
  params = rule if arm == 'rule' else with_constant_head(rule, args.constant)
  config = arm_config(env, arm, args.updates, args.rate, args.seeds)
  print(f'{env}, {arm}: {args.updates} updates, seeds {args.seeds}')
  trainer = Trainer(
    config,
    None,
    rule_params=params,
    progress=False,
    log_every=-(-args.updates // 5),
  )
  trainer.fit()
  rows = pd.DataFrame(trainer.rows)
  rows['env'], rows['arm'] = env, arm
  return rows


def blocks(rows: pd.DataFrame, size: int) -> pd.DataFrame:
  """Means per (env, arm, block of `size` updates) over steps and seeds."""
  rows = rows.assign(first_update=rows['step'] // size * size)
  keys = ['env', 'arm', 'first_update']
  return rows.groupby(keys)[list(COLUMNS)].mean().reset_index()


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('rule', help='a rule file of an action target (npz)')
  parser.add_argument('--envs', nargs='+', default=['lpg:sparse'])
  parser.add_argument('--arms', nargs='+', choices=ARMS, default=list(ARMS))
  parser.add_argument('--updates', type=int, default=500)
  parser.add_argument('--rate', type=float, default=10.0)
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2, 3, 4])
  parser.add_argument(
    '--constant',
    type=float,
    default=0.025,
    help="the constant head's scalar (default: the 6,000-step rule's mean "
    "at zero reward over sparse's first 100 updates, 0.025)",
  )
  parser.add_argument('--block', type=int, default=100)
  parser.add_argument('--csv', help='write the block means here')
  args = parser.parse_args(argv)
  if args.csv and not pathlib.Path(args.csv).parent.is_dir():
    print(
      f'error: --csv {args.csv}: its folder does not exist.', file=sys.stderr
    )
    return 2
  try:
    rule = weights.load_rule(args.rule)
  except (OSError, ValueError) as error:
    print(f'error: {error}', file=sys.stderr)
    return 2
  if not disco.has_action_head(rule):
    print(f'error: {args.rule} has no action head.', file=sys.stderr)
    return 2
  try:
    frames = [
      run_arm(rule, env, arm, args) for env in args.envs for arm in args.arms
    ]
  except ValueError as error:  # Bad settings: an env, a rate, the seeds.
    print(f'error: {error}', file=sys.stderr)
    return 2
  table = blocks(pd.concat(frames), args.block)
  with pd.option_context('display.width', 200, 'display.precision', 4):
    print(table.to_string(index=False))
  if args.csv:
    try:
      table.to_csv(args.csv, index=False, float_format='%.6g')
    except OSError as error:  # A missing folder, a full disk.
      print(f'error: cannot write --csv {args.csv}: {error}', file=sys.stderr)
      return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
