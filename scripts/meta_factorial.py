# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Issue 69's factorial of meta-trainings: the committed table from the runs.

  python scripts/meta_factorial.py runs/f69 docs/results/lpg_transfer/factorial

RUNS holds one meta-training run directory per arm (named like R1_P_L:
regularisers on (R1) or off (R0), per-agent Adam (P) or one Adam on the
averaged meta-gradient (A), lifetimes drawn per agent (L) or one fixed
lifetime (F); a RES_ prefix: `--policy-target residual`) and, beside each,
ARM.probe.csv written by `disco-rl probe-rule`. For each arm with a
finished run, OUT gets ARM.csv (the run's curves: the columns below, every
meta-step) and ARM_probe.csv (the probe's rows), and the
script prints the page's table: the policy target's entropy against ln
actions (mean of the last 100 meta-steps, and its lowest 50-step mean),
the agents' policy entropy, the rewarded steps, and the probe's coherence
of each part on the policy target's heads and y, z.
"""

import argparse
import json
import math
import pathlib
import shutil

import pandas as pd

COLUMNS = (
  'step',
  'agent_pi_hat_entropy',
  'uniform_entropy',
  'agent_entropy',
  'pos_rewards',
  'neg_rewards',
  'meta_loss',
  'pg_loss',
  'reg_loss',
  'meta_grad_norm',
  'meta_up_norm',
  'meta_grad_pi_out_norm',
  'meta_grad_pi_conv_norm',
  'meta_grad_y_norm',
  'meta_grad_z_norm',
  'meta_grad_torso_norm',
  'action_l2',
)
HEADS = ('pi_out', 'pi_action', 'pi_conv', 'y', 'z')


def finished(run: pathlib.Path) -> bool:
  try:
    return bool(json.loads((run / 'summary.json').read_text())['completed'])
  except (OSError, ValueError, KeyError):
    return False


def arm_row(name: str, curves: pd.DataFrame, probe: pd.DataFrame | None):
  """One line of the table."""
  uniform = (
    curves['uniform_entropy'].iloc[-1]
    if 'uniform_entropy' in curves
    else math.log(5)  # lpg:all's 5 actions (runs before the column).
  )
  target = curves['agent_pi_hat_entropy']
  row = dict(
    arm=name,
    steps=len(curves),
    target_gap_last100=uniform - target.iloc[-100:].mean(),
    target_gap_max50=uniform - target.rolling(50).mean().min(),
    agent_entropy_last100=curves['agent_entropy'].iloc[-100:].mean(),
    pos_rewards_first100=curves['pos_rewards'].iloc[:100].mean(),
    pos_rewards_last100=curves['pos_rewards'].iloc[-100:].mean(),
  )
  if probe is not None:
    for (age, part, head), r in probe.set_index(
      ['age', 'part', 'head']
    ).iterrows():
      if head in HEADS:
        row[f'{part}_{head}_coh@{age}'] = r['coherence']
        row[f'{part}_{head}_t@{age}'] = r['t_share']
    row['probe_target_gap@50'] = (
      probe[probe.age == probe.age.max()]
      .eval('uniform_entropy - target_entropy')
      .iloc[0]
    )
  return row


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('runs', type=pathlib.Path)
  parser.add_argument('out', type=pathlib.Path)
  args = parser.parse_args()
  args.out.mkdir(parents=True, exist_ok=True)
  rows = []
  for run in sorted(p for p in args.runs.iterdir() if p.is_dir()):
    if not finished(run):
      continue
    curves = pd.read_csv(run / 'metrics.csv')
    curves = curves[[c for c in COLUMNS if c in curves]]
    curves.to_csv(
      args.out / f'{run.name}.csv', index=False, float_format='%.7g'
    )
    probe_path = args.runs / f'{run.name}.probe.csv'
    probe = None
    if probe_path.is_file():
      shutil.copyfile(probe_path, args.out / f'{run.name}_probe.csv')
      probe = pd.read_csv(probe_path)
    rows.append(arm_row(run.name, curves, probe))
  table = pd.DataFrame(rows).set_index('arm')
  pd.set_option('display.width', 250)
  print(table.T.to_string(float_format=lambda x: f'{x:.3g}'))


if __name__ == '__main__':
  main()
