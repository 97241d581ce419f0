#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-gradient split into its parts, for one agent trained by a fixed
rule.

The meta-objective (`meta_objective.meta_loss`) is the validation policy
gradient of the updated agent plus four regularisers
(`meta_objective.MetaLossWeights`): an entropy bonus on the validation
policy ('entropy', 1e-2), the entropy of the y and z predictions
('prediction_entropy', 1e-3), the squared batch means of the pi, y and z
targets ('target_mean', 1e-3) and the KL from the target network's policy
to the policy target ('target_kl', 1e-2). Per meta-step this script
computes the rule's gradient of the policy-gradient term alone ('pg':
every regulariser's weight 0) and of each regulariser (the gradient with
its weight alone on, less 'pg'; the loss is linear in the weights, so the
parts add up to the whole), while one agent learns from the rule (the
rule is not updated). What a meta-optimiser integrates over many
meta-steps is each part's mean, so the summary gives, per part, the norm
of the mean over the meta-steps, the mean of the norms, their ratio (1: the
same direction every meta-step; about 1/sqrt(K): noise), the cosine
between the mean of the whole gradient and the mean of each part, and the
medians over the meta-steps of each part's norm and of its cosine with
that meta-step's whole gradient. The first `--skip` meta-steps are run but
not summarised: a fresh agent's first updates give one-off gradients
(FourRooms' first: a norm of 30, against about 0.01 after).

  python scripts/meta_grad_parts.py --task gymnax:Acrobot-v1 --rule random \
      --out docs/results/meta_suite_cpu/grad_parts/acrobot_random.csv
  python scripts/meta_grad_parts.py --task 'catch[rows=5,columns=5]' \
      --rule docs/results/meta_suite_cpu/stage2/update_rule_params.npz

The agent's settings and the regularisers' weights are the meta-training
notebook's (`MetaTrainConfig` defaults; `--set NAME=VALUE` changes a
field, e.g. `dense=64,64` or `meta_target_mean_cost=0`).
"""

import argparse
import dataclasses
import json
import pathlib
import sys
import time

import jax
from jax.flatten_util import ravel_pytree
import jax.numpy as jnp
import numpy as np
import pandas as pd

from disco_rl import meta_objective
from disco_rl import weights
from disco_rl.examples import flags
from disco_rl.loops import config as config_lib
from disco_rl.loops import meta_setup

REGULARISERS = tuple(
  f.name for f in dataclasses.fields(meta_objective.MetaLossWeights)
)
PARTS = ('pg',) + REGULARISERS
NO_REGULARISERS = meta_objective.MetaLossWeights(
  **dict.fromkeys(REGULARISERS, 0.0)
)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
  denom = np.linalg.norm(a) * np.linalg.norm(b)
  return float(a @ b / denom) if denom > 0 else float('nan')


def make_meta_step(member, config):
  """(rule params, agent state, rng) -> (agent state, {part: [P] gradient},
  logs): one meta-step's rollouts and its gradient's parts (`PARTS`)."""

  def grad_with(
    loss_weights, params, state, train_rollouts, valid_rollout, rng
  ):
    return meta_objective.calculate_meta_gradient(
      params,
      state,
      train_rollouts,
      valid_rollout,
      rng,
      member,
      weights=loss_weights,
      unroll=True,
    )

  @jax.jit
  def meta_step(params, state, rng):
    act_rng, grad_rng = jax.random.split(rng)
    state, train_rollouts = jax.lax.scan(
      lambda s, key: member.unroll_actor(s, key, config.rollout_len),
      state,
      jax.random.split(act_rng, config.num_inner_steps),
    )
    state, valid_rollout = member.unroll_actor(
      state, act_rng, 2 * config.rollout_len
    )
    args = (params, state, train_rollouts, valid_rollout, grad_rng)
    g_pg, (state, _, meta_log) = grad_with(NO_REGULARISERS, *args)
    pg = ravel_pytree(g_pg)[0]
    parts = dict(pg=pg)
    # The meta-loss is linear in the weights: each regulariser's part is
    # the gradient with its weight alone on, less the policy gradient's.
    weights_on = config.meta_loss_weights()
    for name in REGULARISERS:
      alone = dataclasses.replace(
        NO_REGULARISERS, **{name: getattr(weights_on, name)}
      )
      parts[name] = ravel_pytree(grad_with(alone, *args)[0])[0] - pg
    logs = dict(
      rewards=jnp.mean(train_rollouts.rewards),
      entropy=meta_log['entropy'],
      pg_loss=meta_log['pg_loss'],
    )
    return state, parts, logs

  return meta_step


def summarise(
  sums: dict, norm_sums: dict, steps: int, rows: list[dict] | None = None
) -> dict:
  """Per part: the norm of its mean over the meta-steps, the mean of its
  norms, their ratio, and the cosine of its mean with the whole's mean;
  with the steps' `rows`, also the medians over the steps of the part's
  norm and of its cosine with that step's whole gradient."""
  total = sum(sums.values())
  out = {'whole': dict(norm_of_mean=float(np.linalg.norm(total) / steps))}
  for part in PARTS:
    out[part] = dict(
      norm_of_mean=float(np.linalg.norm(sums[part]) / steps),
      mean_norm=norm_sums[part] / steps,
      consistency=float(np.linalg.norm(sums[part]) / norm_sums[part])
      if norm_sums[part] > 0
      else float('nan'),
      cosine_with_whole=cosine(sums[part], total),
    )
    if rows:
      out[part].update(
        median_norm=float(np.median([r[f'{part}_norm'] for r in rows])),
        median_step_cosine=float(
          np.median([r[f'{part}_cosine'] for r in rows])
        ),
      )
  return out


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument(
    '--task', required=True, help='one task spec, e.g. gymnax:Acrobot-v1'
  )
  parser.add_argument(
    '--rule',
    default='random',
    help="'random' (a fresh meta-network, --rule-seed), "
    "'disco_103', or an npz of a rule",
  )
  parser.add_argument('--rule-seed', type=int, default=1)
  parser.add_argument('--steps', type=int, default=70)
  parser.add_argument(
    '--skip',
    type=int,
    default=10,
    help="first meta-steps run but not summarised (a fresh agent's first "
    'updates give one-off gradients hundreds of times the later ones)',
  )
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument(
    '--set',
    nargs='+',
    default=[],
    metavar='NAME=VALUE',
    type=lambda a: flags.field_value(config_lib.MetaTrainConfig, a),
    help='MetaTrainConfig fields (the agent settings), e.g. dense=64,64',
  )
  parser.add_argument(
    '--out',
    default=None,
    metavar='CSV',
    help='per meta-step norms (and a .json summary beside)',
  )
  args = parser.parse_args(argv)
  if args.steps < 1:
    parser.error(f'--steps: expected at least 1, got {args.steps}')
  if not 0 <= args.skip < args.steps:
    parser.error(
      f'--skip: expected 0 <= skip < --steps={args.steps}, got {args.skip}'
    )
  try:
    config = config_lib.MetaTrainConfig(
      **{**dict(args.set), 'tasks': (args.task,), 'num_agents': 1}
    )
    (task,) = config.suite
    member = meta_setup.make_member(config, task, axis_name=None)
    rule = member.agent.update_rule
    if args.rule in ('random', 'disco_103'):
      params = weights.starting_rule_params(
        rule, args.rule == 'disco_103', args.rule_seed
      )
    else:
      params = weights.load_rule(args.rule, config.rule_sizes)
  except (ValueError, TypeError, OSError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2

  meta_step = make_meta_step(member, config)
  rng = jax.random.PRNGKey(args.seed)
  init_rng, rng = jax.random.split(rng)
  state = member.init_state(init_rng)
  sums = norm_sums = None
  rows, start = [], time.time()
  for k in range(args.steps):
    state, parts, logs = meta_step(params, state, jax.random.fold_in(rng, k))
    parts = {p: np.asarray(v, np.float64) for p, v in parts.items()}
    if sums is None:
      sums = {p: np.zeros_like(v) for p, v in parts.items()}
      norm_sums = dict.fromkeys(PARTS, 0.0)
    whole = sum(parts.values())
    row = dict(
      step=k,
      **{k_: float(v) for k_, v in logs.items()},
      whole_norm=float(np.linalg.norm(whole)),
    )
    for p in PARTS:
      row[f'{p}_norm'] = float(np.linalg.norm(parts[p]))
      row[f'{p}_cosine'] = cosine(parts[p], whole)
      if k >= args.skip:  # The first `skip` are not summarised.
        sums[p] += parts[p]
        norm_sums[p] += row[f'{p}_norm']
    rows.append(row)
    if k == 0 or (k + 1) % 10 == 0:
      print(
        f'step {k + 1}/{args.steps} reward {row["rewards"]:.4f} '
        f'entropy {row["entropy"]:.4f} | norms: '
        + ' '.join(f'{p} {row[p + "_norm"]:.2e}' for p in PARTS)
        + f' | {time.time() - start:.0f}s',
        flush=True,
      )
  kept = rows[args.skip :]
  summary = dict(
    task=args.task,
    rule=args.rule,
    steps=args.steps,
    skip=args.skip,
    seed=args.seed,
    settings=dict(args.set),
    parts=summarise(sums, norm_sums, len(kept), kept),
    mean_reward=float(np.mean([r['rewards'] for r in kept])),
    last_entropy=rows[-1]['entropy'],
  )
  print(json.dumps(summary['parts'], indent=1))
  if args.out:
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, index=False)
    out.with_suffix('.json').write_text(json.dumps(summary, indent=1) + '\n')
    print(f'wrote {out} and {out.with_suffix(".json")}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
