# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What Disco103 asks of a fresh agent on Catch 8x8, every 10 updates
(issue 70; docs/studies/plateau.md, "Why the plateau").

Each condition is an eval run at the upstream eval's settings (Catch 8x8,
seeds 0-2 in one program, 1,000 updates), with or without a warm start;
with `--game breakout`, in the MinAtar study's regime on Breakout at its
Disco103 rate (1e-3, 3,000 updates; studies/minatar.py), every 100 updates.
After every call of 10 iterations the run's state is read, unchanged: a
batch of 64 trajectories is drawn from each seed's replay buffer, as its
next update would draw one, and the rule's targets on it are measured
against the agent's outputs (`targets`). The runs' own rows are the CLI's
(`metrics.csv`); the measurements go to `targets.csv` beside them.

The transplant conditions (TRANSPLANTS) first train a donor run of the
same settings on DONOR_SEEDS (`out`/donor, once), then start each measured
agent from the donor's network with the policy's output layer zeroed (a
uniform policy), and with fresh y and z heads in `transplant_fresh_yz`.

  python studies/plateau_mechanism.py runs/plateau_mechanism cold pred300
  python studies/plateau_mechanism.py runs/plateau_mechanism --report \\
      docs/results/plateau                 # mechanism.{csv,md,png}
  python studies/plateau_mechanism.py OUT cold --tiny     # test size
  python studies/plateau_mechanism.py runs/plateau_breakout cold pred300 \
      --game breakout

About 13 minutes per Catch condition on this project's 2-core CPU.
"""

import argparse
import dataclasses
import importlib.util
import json
import math
import pathlib
import re
import sys
from typing import Any

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from disco_rl import agent as agent_lib
from disco_rl import replay
from disco_rl import utils
from disco_rl.cli import eval as eval_cli
from disco_rl.jobs import config as config_lib
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.studies import measure
from disco_rl.update_rules import warm_start

EVERY = 10  # Iterations between measurements (one call).
BATCH = 64  # Trajectories measured (Catch's learner batch).
SEEDS = (0, 1, 2)
BASE = dict(env='jittable_catch', seeds=SEEDS, num_steps=1000)


def _minatar_study():
  path = pathlib.Path(__file__).with_name('minatar.py')
  spec = importlib.util.spec_from_file_location('minatar_study', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def game_base(game: str) -> tuple[dict[str, Any], int]:
  """(BASE of `game`, iterations between measurements): Catch 8x8 at the
  upstream eval's settings, or Breakout in the MinAtar study's regime at
  the rate its procedure chose for Disco103."""
  if game == 'catch':
    return BASE, EVERY
  study = _minatar_study()
  base = dict(
    study.BASE,
    env=study.env('Breakout'),
    seeds=SEEDS,
    num_steps=study.UPDATES,
    learning_rate=study.TABLE_RATES['disco_103'][0],
  )
  return base, 100


# Each condition's changes to BASE (EvalConfig fields).
CONDITIONS: dict[str, dict[str, Any]] = {
  'cold': {},
  # Disco's y, z and auxiliary-policy targets (and its value loss) for 300
  # updates with the policy's term off, then all of Disco: are the
  # predictions what the plateau waits for?
  'pred300': dict(warm_start_predictions=True, warm_start_steps=300),
  'pred150': dict(warm_start_predictions=True, warm_start_steps=150),
  # The actor-critic's loss for 100 updates (Disco's value loss too).
  'ac100': dict(warm_start_rule='actor_critic', warm_start_steps=100),
  # Breakout: the actor-critic at its own rate (the MinAtar study's
  # procedure chose 3e-3 for it) for 300 updates, then Disco at 1e-3.
  'ac300_3e-3': dict(
    warm_start_rule='actor_critic',
    warm_start_steps=300,
    warm_start_learning_rate=3e-3,
  ),
  'ac300pred_3e-3': dict(
    warm_start_rule='actor_critic',
    warm_start_steps=300,
    warm_start_learning_rate=3e-3,
    warm_start_predictions=True,
  ),
  'ac100pred': dict(
    warm_start_rule='actor_critic',
    warm_start_steps=100,
    warm_start_predictions=True,
  ),
  # Breakout, the length by the stated procedure (`warm_start_length`): the
  # actor-critic at 3e-3 on the MinAtar study's sweep seeds (100, 101;
  # docs/results/minatar/curves.csv) is half way at updates 624 and 424.
  # Catch, the same procedure: the actor-critic at 3e-3 (the rate the
  # MinAtar study chose for it on Breakout) on seeds 100 and 101 is half way
  # at updates 97 and 80 (docs/results/plateau/catch_ac_sweep.csv).
  'ac88pred_3e-3': dict(
    warm_start_rule='actor_critic',
    warm_start_steps=88,
    warm_start_learning_rate=3e-3,
    warm_start_predictions=True,
  ),
  # A causal test of the z reading (plateau.md): agents whose networks
  # Disco103 trained elsewhere (DONOR_SEEDS, 1,000 updates) with the
  # policy's output layer zeroed (an exactly uniform policy), their z
  # spread from the start; and the same with fresh y and z heads.
  'transplant': {},
  'transplant_fresh_yz': {},
  # The same from an actor-critic donor (3e-3): its torso, the rest fresh
  # (the actor-critic's agent has no y, z or action model).
  'transplant_ac': {},
  # A Disco-trained donor's torso only (the action model and heads fresh).
  'transplant_torso': {},
  # The donor's action model and heads with a fresh torso: the other half
  # of transplant_torso.
  'transplant_model': {},
  # Disco's terms other than the policy's for 300 updates at 3x the run's
  # rate (Catch 3e-2, Breakout 3e-3), then all of Disco at its rate: does
  # learning what z reads faster shorten the wait?
  'pred300_x3': dict(
    warm_start_predictions=True, warm_start_steps=300, warm_start_rate_scale=3
  ),
  'ac524pred_3e-3': dict(
    warm_start_rule='actor_critic',
    warm_start_steps=524,
    warm_start_learning_rate=3e-3,
    warm_start_predictions=True,
  ),
  # Stoix's on-policy regime (the eval command's `--preset stoix`: rollouts
  # of 128, 4 epochs of 8 minibatches, 3e-4, no replay) for as many learner
  # updates as the game's cold run (`condition_config`).
  'stoix': dict(eval_cli.PRESETS['stoix']),
  # The same regime at Disco103's rate of the replay regime (the game's
  # BASE: 1e-2 on Catch, 1e-3 on Breakout) instead of Stoix's 3e-4.
  'stoix_base_rate': {
    k: v for k, v in eval_cli.PRESETS['stoix'].items() if k != 'learning_rate'
  },
}
# Transplant conditions: the heads (of HEADS) that keep the fresh agent's
# parameters; the policy's output layer is zeroed, the rest is the donor's.
TRANSPLANTS = {
  'transplant': (),
  'transplant_fresh_yz': ('y', 'z'),
  'transplant_ac': (),
  'transplant_torso': ('y', 'z', 'model'),
  'transplant_model': ('torso',),
}
# The donors' rules other than the run's (EvalConfig changes).
DONOR_RULES = {
  'transplant_ac': dict(rule='actor_critic', learning_rate=3e-3),
}
DONOR_SEEDS = (10, 11, 12)
# The agent's heads by their modules' names: the policy's output layer (its
# logits), the per-state y head, the action model's z head, the action
# model with all its heads, and the torso.
HEADS = {
  'policy': re.compile(r'/~_head_pass/torso_head/'),
  'y': re.compile(r'/~_head_pass/torso_head_1/'),
  'z': re.compile(r'^[^/]+/mlp/'),
  # The action model and its heads (z, the auxiliary policy, q): every
  # module of the network outside its torso and per-state heads.
  'model': re.compile(r'^[^/]+/[^~]'),
  # The torso: the embedding the per-state heads and the action model read.
  'torso': re.compile(r'/~_embedding_pass/'),
}
TINY = dict(
  num_steps=20,
  batch_size=8,
  replay_ratio=2,
  buffer_capacity=16,
  rollout_len=6,
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
)
NUM_ACTIONS = 3  # Catch's and MinAtar Breakout's.
GAMES = {'catch': 'Catch 8x8', 'breakout': 'MinAtar Breakout'}


def _spread(probs: jax.Array, live: jax.Array) -> jax.Array:
  """Mean total-variation distance of [T, B, K] distributions from their
  mean over the live steps ([T, B] weights): 0 when every step gets the
  same distribution, up to 1."""
  w = live[..., None] / jnp.sum(live)
  mean = jnp.sum(probs * w, axis=(0, 1))
  return jnp.sum(0.5 * jnp.sum(jnp.abs(probs - mean), -1) * live) / jnp.sum(
    live
  )


def _corr(x: jax.Array, y: jax.Array, live: jax.Array) -> jax.Array:
  """Pearson correlation of [T, B] `x` and `y` over the live steps."""
  w = live / jnp.sum(live)
  dx, dy = x - jnp.sum(x * w), y - jnp.sum(y * w)
  cov = jnp.sum(dx * dy * w)
  return cov / jnp.sqrt(jnp.sum(dx * dx * w) * jnp.sum(dy * dy * w) + 1e-12)


def targets(agent, rule_params, learner_state, net_state, rollout, key):
  """The rule's targets on a [T, B] `rollout` against the agent's outputs,
  as scalars (the learner step's own computation, its update discarded).

  pi_hat, y_hat, z_hat: the targets' distributions; pi, y, z: the agent's
  (z at the action taken). `*_spread`: `_spread` over the batch's steps.
  `push_adv_corr`: the correlation over steps of log pi_hat(a_t) - log
  pi(a_t) (how far the target moves the action taken) with the rule's
  advantage of it, raw and normalised.
  """
  _, _, logs = agent.learner_step(
    key, rollout, learner_state, net_state, rule_params, False
  )
  meta_out = logs['meta_out']
  if warm_start.WARM_KEY in meta_out:
    meta_out = meta_out['main']
  out, _ = agent.unroll_net(learner_state.params, net_state, rollout)
  out = jax.tree.map(lambda x: x[:-1], out)
  a_t = rollout.actions[:-1]
  live = (rollout.discounts[:-1] > 0).astype(jnp.float32)
  mean = lambda x: jnp.sum(x * live) / jnp.sum(live)
  pi_hat, pi = distrax.Softmax(meta_out['pi']), distrax.Softmax(out['logits'])
  z_a = utils.batch_lookup(out['z'], a_t)
  probs = dict(
    pi_hat=pi_hat.probs,
    pi=pi.probs,
    y_hat=jax.nn.softmax(meta_out['y']),
    y=jax.nn.softmax(out['y']),
    z_hat=jax.nn.softmax(meta_out['z']),
    z=jax.nn.softmax(z_a),
  )
  push = pi_hat.log_prob(a_t) - pi.log_prob(a_t)
  stats = {f'{k}_spread': _spread(v, live) for k, v in probs.items()}
  stats.update(
    pi_hat_entropy=mean(pi_hat.entropy()),
    pi_entropy=mean(pi.entropy()),
    kl_target_policy=mean(pi_hat.kl_divergence(pi)),
    y_hat_entropy=mean(distrax.Softmax(meta_out['y']).entropy()),
    y_entropy=mean(distrax.Softmax(out['y']).entropy()),
    adv_std=jnp.sqrt(mean(meta_out['adv'] ** 2) - mean(meta_out['adv']) ** 2),
    push_adv_corr=_corr(push, meta_out['adv'], live),
    push_normalized_adv_corr=_corr(push, meta_out['normalized_adv'], live),
    push_abs=mean(jnp.abs(push)),
  )
  return stats


class Measurer:
  """A Trainer callback: `targets` of every seed after each call."""

  def __init__(self, path: pathlib.Path):
    self.path = path
    self.rows: list[dict[str, float]] = []
    self._measure = None

  def _compiled(self, trainer):
    setup = trainer.job.setup
    agent = agent_lib.Agent(  # The run's agent, outside the mesh.
      single_observation_spec=setup.agent.single_observation_spec,
      single_action_spec=setup.agent.single_action_spec,
      agent_settings=setup.agent.settings,
      batch_axis_name=None,
    )

    def measure_seed(state, s, key):
      pick = lambda x: x[s]
      learner_state = jax.tree.map(pick, state.learner_state)
      buffer = jax.tree.map(lambda x: x[0, s], state.replay)
      net_state = jax.tree.map(lambda x: x[0, s], state.actor_state)
      sample_key, step_key = jax.random.split(key)
      rollout = replay.sample(buffer, sample_key, BATCH)
      return targets(
        agent, state.rule_params, learner_state, net_state, rollout, step_key
      )

    return jax.jit(measure_seed, static_argnums=1)

  def __call__(self, trainer, new_rows) -> None:
    if not new_rows:
      return
    state = trainer.state
    step = int(new_rows[-1]['step'])
    if self._measure is None:
      self._measure = self._compiled(trainer)
    ready = int(jax.device_get(state.replay.size).ravel()[0])
    if ready < BATCH and ready < trainer.job.setup.batch_per_device:
      return
    for s, seed in enumerate(trainer.config.seeds):
      key = jax.random.fold_in(jax.random.PRNGKey(seed), step)
      stats = jax.device_get(self._measure(state, s, key))
      self.rows.append(
        dict(step=step, seed=seed) | {k: float(v) for k, v in stats.items()}
      )
    pd.DataFrame(self.rows).to_csv(self.path, index=False)


def condition_config(
  name: str, game: str = 'catch', tiny: bool = False
) -> config_lib.EvalConfig:
  """The eval settings of condition `name` on `game` (at test size with
  `tiny`), measured every call (every `game_base` iterations, or every
  step of an on-policy condition: its 32 updates)."""
  base, every = game_base(game)
  settings = {**base, **CONDITIONS[name], **(TINY if tiny else {})}
  per_step = settings.get('epochs', 0) * settings.get('minibatches', 1)
  if per_step:  # On-policy: the replay run's updates, in fewer steps.
    settings['num_steps'] = -(-settings['num_steps'] // per_step)
    if tiny:
      settings.update(replay_ratio=1, buffer_capacity=settings['batch_size'])
  settings['steps_per_call'] = max(1, every // max(per_step, 1))
  scale = settings.pop('warm_start_rate_scale', None)
  if scale is not None:  # A multiple of the run's own rate.
    rate = settings.get('learning_rate', config_lib.EvalConfig.learning_rate)
    settings['warm_start_learning_rate'] = scale * rate
  if tiny and 'warm_start_steps' in settings:
    settings['warm_start_steps'] = 5
  return config_lib.EvalConfig(**settings)


def finished(directory: pathlib.Path) -> bool:
  """Whether the run in `directory` ran to its end: its summary.json says
  completed (a run stopped by a signal writes one that does not; it is
  run again from its start)."""
  try:
    summary = json.loads((directory / 'summary.json').read_text())
  except (OSError, ValueError):
    return False
  return summary.get('completed') is True


def run_condition(
  out: pathlib.Path, name: str, tiny: bool, game: str = 'catch'
) -> None:
  config = condition_config(name, game, tiny)
  directory = out / name
  if finished(directory):
    print(f'{name}: done already ({directory})')
    return
  donor = None
  if name in TRANSPLANTS:
    donor = donor_params(out, config, DONOR_RULES.get(name, {}))
  measurer = Measurer(out / f'{name}.targets.csv')
  trainer = trainer_lib.Trainer(
    config, directory, overwrite=True, progress=False, checkpoint_every=0
  )
  if donor is not None:
    state = trainer.state
    learner = state.learner_state
    fresh = jax.device_get(learner.params)
    params = transplant(fresh, donor, TRANSPLANTS[name])
    put = lambda new, old: jax.device_put(np.array(new), old.sharding)
    # Disco's target network starts as the agent (its init_meta_state), in
    # buffers of its own (the step donates both).
    meta_state = dict(
      learner.meta_state,
      target_params=jax.tree.map(
        put, params, learner.meta_state['target_params']
      ),
    )
    params = jax.tree.map(put, params, learner.params)
    trainer.state = dataclasses.replace(
      state,
      learner_state=dataclasses.replace(
        learner, params=params, meta_state=meta_state
      ),
    )
  trainer.fit(callbacks=[measurer])
  trainer.close()
  print(f'{name}: {directory}/metrics.csv, {measurer.path}', flush=True)


def transplant(
  params: dict[str, Any], donor: dict[str, Any], fresh: tuple[str, ...]
) -> dict[str, Any]:
  """A fresh agent's parameters `params` with the donor's (same structure,
  e.g. [seeds, ...] leaves) in every module but the heads named in `fresh`
  (of HEADS: those keep `params`'), and the policy's output layer zeroed,
  so the policy is exactly uniform. A module the donor lacks, or has with
  other shapes (another rule's agent: the actor-critic's has no y, z or
  action model), keeps `params`'.

  Raises:
    ValueError: `fresh` names no head of HEADS, or a head matches no
      module of `params`.
  """
  unknown = [h for h in fresh if h not in HEADS or h == 'policy']
  if unknown:
    raise ValueError(
      f'fresh must name heads of {sorted(set(HEADS) - {"policy"})}, got '
      f'{unknown}.'
    )
  for head, pattern in HEADS.items():
    if not any(pattern.search(m) for m in params):
      raise ValueError(f'no module of head {head!r} in {sorted(params)}.')
  out = {}
  for module, leaves in params.items():
    if HEADS['policy'].search(module):
      out[module] = {k: np.zeros_like(v) for k, v in leaves.items()}
    elif any(HEADS[h].search(module) for h in fresh) or not _same_shapes(
      leaves, donor.get(module)
    ):
      out[module] = dict(leaves)
    else:
      out[module] = dict(donor[module])
  return out


def _same_shapes(leaves: dict[str, Any], other: dict[str, Any] | None) -> bool:
  return other is not None and {k: np.shape(v) for k, v in leaves.items()} == {
    k: np.shape(v) for k, v in other.items()
  }


def donor_params(
  out: pathlib.Path, config, changes: dict[str, Any] | None = None
) -> dict[str, Any]:
  """The learner parameters ([seeds, ...]) of a cold run of `config`'s
  settings with `changes` (e.g. another rule) on DONOR_SEEDS, trained for
  its updates (run once in `out`/donor[_RULE], then read from the npz
  beside it)."""
  changes = changes or {}
  suffix = f'_{changes["rule"]}' if 'rule' in changes else ''
  path = out / f'donor{suffix}_params.npz'
  if not path.exists():
    donor_config = dataclasses.replace(config, seeds=DONOR_SEEDS, **changes)
    trainer = trainer_lib.Trainer(
      donor_config, out / f'donor{suffix}', overwrite=True, progress=False,
      checkpoint_every=0,
    )  # fmt: skip
    trainer.fit()
    params = jax.device_get(trainer.state.learner_state.params)
    trainer.close()
    flat = {
      f'{module}|{name}': np.asarray(v)
      for module, leaves in params.items()
      for name, v in leaves.items()
    }
    np.savez(path, **flat)
  with np.load(path) as data:
    donor: dict[str, dict[str, np.ndarray]] = {}
    for key in data.files:
      module, name = key.split('|')
      donor.setdefault(module, {})[name] = data[key]
  return donor


def _updates(rows: pd.DataFrame) -> pd.DataFrame:
  rows = rows.sort_values(['seed', 'step']).copy()
  rows['updates'] = rows.groupby('seed')['learned'].cumsum()
  return rows


def half_way_for_good(run: pd.DataFrame, start: float, end: float) -> float:
  """The first update from which the return's moving mean (as
  `measure.plateau`'s) stays at or above half way from `start` to `end`
  (NaN: it ends below). Stricter than the plateau where a warm start's
  return rises, falls back part of the way after the switch, and rises
  again."""
  smooth = (
    run['avg_return'].astype(float)
    .rolling(measure.PLATEAU_WINDOW, min_periods=1).mean().to_numpy()
  )  # fmt: skip
  below = np.flatnonzero(~(smooth >= (start + end) / 2))
  ends_below = below.size and below[-1] == len(run) - 1
  if not math.isfinite(start + end) or ends_below:
    return math.nan
  first = below[-1] + 1 if below.size else 0
  return float(run['updates'].to_numpy()[first])


def warm_start_length(curves: pd.DataFrame, updates: int) -> int:
  """The warm start's length by the stated procedure: the mean over the
  runs in `curves` (the warm rule alone at its rate, on sweep seeds, not
  the seeds measured) of the update at which its return first reaches
  half way from its start to its end (the first `measure.PLATEAU_START`
  and last `measure.PLATEAU_END` of the run's points, as
  `measure.plateau`), rounded: the warm rule hands over when it has done
  half of its own learning.

  Args:
    curves: compact curves (`measure.compact_curves`): seed, env_steps,
      avg_return, and updates where the rows had them; every run `updates`
      learner updates long.
    updates: each run's learner updates; without an updates column, a
      point's update is `updates * env_steps / the run's last env_steps`.
  """
  crossings = []
  for seed, run in curves.groupby('seed'):
    run = run.sort_values('env_steps')
    returns = run['avg_return'].to_numpy(float)
    steps = run['env_steps'].to_numpy(float)
    n = len(returns)
    start = np.nanmean(returns[: max(1, int(n * measure.PLATEAU_START))])
    end = np.nanmean(returns[int(n * (1 - measure.PLATEAU_END)) :])
    reached = np.flatnonzero(returns >= (start + end) / 2)
    if end <= start or not reached.size:
      raise ValueError(
        f'curves: seed {seed} does not rise to half way (start {start:.3g}, '
        f'end {end:.3g}); no warm-start length.'
      )
    if 'updates' in run:
      crossings.append(float(run['updates'].to_numpy()[reached[0]]))
    else:
      crossings.append(updates * steps[reached[0]] / steps[-1])
  return round(float(np.mean(crossings)))


def report(
  out: pathlib.Path, results: pathlib.Path, game: str = 'catch'
) -> None:
  """Plateaus per seed (measure.plateau), the targets' measurements per
  condition and seed, the runs' compact curves, and a figure of the
  measurements against updates, of the finished runs in `out`.

  Conditions that `results` already reports and `out` has no finished run
  of are kept (from its CSVs, unchanged), so a condition run later is
  added to a committed report rather than replacing it."""
  results.mkdir(parents=True, exist_ok=True)
  # Finished runs only (`finished`): one still running, or cut, is left
  # out (its end, and so its plateau, is not known yet).
  names = [n for n in CONDITIONS if finished(out / n)]
  plateaus, measured, curves = _kept(results, names)
  for name in names:
    rows = _updates(pd.read_csv(out / name / 'metrics.csv'))
    curves.append(measure.compact_curves(rows).assign(condition=name))
    runs = []
    for seed, run in rows.groupby('seed'):
      got = measure.plateau(run, NUM_ACTIONS)
      runs.append(
        dict(
          condition=name,
          seed=seed,
          final=measure.final_return(run),
          for_good=half_way_for_good(run, got['start'], got['end']),
          **got,
        )
      )
    plateaus.append(pd.DataFrame(runs))
    path = out / f'{name}.targets.csv'
    if path.exists():
      table = pd.read_csv(path)
      table = table.merge(
        rows[['seed', 'step', 'updates']], on=['seed', 'step'], how='left'
      )
      measured.append(table.assign(condition=name))
  # Every run's curve, compact (measure.compact_curves).
  _write_csv(
    results / 'curves.csv', _in_order(pd.concat(curves)), float_format='%.5g'
  )
  plateau_table = _in_order(pd.concat(plateaus))
  if measured:
    table = _in_order(pd.concat(measured))
    plateau_table = plateau_table.drop(columns='z_gate', errors='ignore')
    plateau_table = plateau_table.merge(
      z_gate_updates(table), on=['condition', 'seed'], how='left'
    )
    _write_csv(results / 'mechanism.csv', table, float_format='%.5g')
    gate = gate_table(table)
    _write_csv(results / 'mechanism_gate.csv', gate, float_format='%.4g')
    _write_text(results / 'mechanism_gate.md', _gate_markdown(gate))
    _figure(table, plateau_table, results / 'mechanism.png', game)
  _write_csv(results / 'mechanism_plateaus.csv', plateau_table)
  lines = [
    '| condition | plateau per seed | mean | half way for good per seed | '
    'mean | leaves uniform per seed | z spread > 0.1 per seed | final |',
    '|---|---|---|---|---|---|---|---|',
  ]
  for name, group in plateau_table.groupby('condition', sort=False):
    fmt = lambda v: 'n/a' if math.isnan(v) else f'{v:.0f}'
    lines.append(
      f'| {name} | {", ".join(fmt(v) for v in group["plateau"])} | '
      f'{fmt(group["plateau"].mean())} | '
      f'{", ".join(fmt(v) for v in group["for_good"])} | '
      f'{fmt(group["for_good"].mean())} | '
      f'{", ".join(fmt(v) for v in group["leaves_uniform"])} | '
      f'{", ".join(fmt(v) for v in group.get("z_gate", []))} | '
      f'{group["final"].mean():.2f} |'
    )
  _write_text(results / 'mechanism.md', '\n'.join(lines) + '\n')
  print('\n'.join(lines))


# Bins of z's spread (TV over the batch) for `gate_table`.
Z_BINS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 1.0)


def gate_table(table: pd.DataFrame) -> pd.DataFrame:
  """The policy target against the policy, by the spread of the agent's
  z predictions: per condition and bin of Z_BINS (left-open), the
  measurements in it (`rows`, over seeds and updates), the policy's mean
  entropy and the mean of the target's entropy minus the policy's (`gap`:
  > 0, the target is flatter than the policy; < 0, sharper).

  Args:
    table: `targets` measurements (columns condition, z_spread,
      pi_entropy, pi_hat_entropy), one row per seed and measurement.
  """
  binned = table.assign(
    z_bin=pd.cut(table['z_spread'], Z_BINS).astype(str),
    gap=table['pi_hat_entropy'] - table['pi_entropy'],
  )
  out = binned.groupby(['condition', 'z_bin'], sort=False, observed=True).agg(
    rows=('gap', 'size'),
    pi_entropy=('pi_entropy', 'mean'),
    gap=('gap', 'mean'),
  )
  order = {str(b): i for i, b in enumerate(pd.cut([], Z_BINS).categories)}
  out = out.reset_index()
  rank = out['z_bin'].map(order)
  return _in_order(out.iloc[rank.argsort(kind='stable')])


Z_GATE = 0.1  # z's spread from which Disco's target leads the policy.


def z_gate_updates(table: pd.DataFrame) -> pd.DataFrame:
  """Per condition and seed, the first measured update from the end of
  the condition's warm start (0 without one) at which the spread of the
  agent's z predictions is above Z_GATE (`z_gate`; NaN if none).

  Args:
    table: `targets` measurements with condition, seed, updates and
      z_spread columns.
  """
  rows = []
  for (name, seed), run in table.groupby(['condition', 'seed'], sort=False):
    start = CONDITIONS.get(name, {}).get('warm_start_steps', 0)
    run = run[run['updates'] >= start].sort_values('updates')
    above = run['updates'][run['z_spread'] > Z_GATE]
    rows.append(
      dict(
        condition=name,
        seed=seed,
        z_gate=float(above.iloc[0]) if len(above) else math.nan,
      )
    )
  return pd.DataFrame(rows)


def _gate_markdown(gate: pd.DataFrame) -> str:
  """`gate_table` as a markdown table: a row per z bin, a column per
  condition, each cell 'gap (policy entropy, rows)'."""
  conditions = list(dict.fromkeys(gate['condition']))
  lines = [
    '| z spread | ' + ' | '.join(conditions) + ' |',
    '|---' * (len(conditions) + 1) + '|',
  ]
  for z_bin in map(str, pd.cut([], Z_BINS).categories):
    part = gate[gate['z_bin'] == z_bin]
    if part.empty:
      continue
    cells = {r.condition: r for r in part.itertuples()}
    row = [
      f'{c.gap:+.3f} ({c.pi_entropy:.2f}, {c.rows})' if (c := cells.get(n))
      else ''
      for n in conditions
    ]  # fmt: skip
    lines.append(f'| {z_bin} | ' + ' | '.join(row) + ' |')
  return '\n'.join(lines) + '\n'


# The report's tables (in `report`'s results folder).
TABLES = ('mechanism_plateaus.csv', 'mechanism.csv', 'curves.csv')


def _kept(
  results: pathlib.Path, names: list[str]
) -> tuple[list[pd.DataFrame], ...]:
  """([plateaus], [measurements], [curves]) of the conditions that the
  report in `results` holds and `names` does not (empty lists where it has
  none): the rows of each of TABLES whose condition is not in `names`."""
  kept = []
  for table in TABLES:
    path = results / table
    rows = _read_table(path) if path.exists() else None
    if rows is None or rows.empty:
      kept.append([])
    else:
      kept.append([rows[~rows['condition'].isin(names)]])
  return tuple(kept)


def _read_table(path: pathlib.Path) -> pd.DataFrame:
  """The CSV at `path`, checked whole: a file cut short (no final newline,
  or a line with fewer fields than the header) would be read with empty
  cells and written back so; it is refused instead.

  Raises:
    ValueError: `path` is cut or has a line of another width.
  """
  text = path.read_text()
  lines = text.splitlines()
  width = lines[0].count(',') if lines else -1
  bad = [i + 1 for i, line in enumerate(lines) if line.count(',') != width]
  if not text.endswith('\n') or bad:
    where = f'line {bad[0]}' if bad else 'its end'
    raise ValueError(
      f'{path} is cut or damaged at {where}: restore it (e.g. git checkout '
      '-- it) before reporting again; nothing was written.'
    )
  return pd.read_csv(path)


def _write_csv(path: pathlib.Path, table: pd.DataFrame, **kwargs) -> None:
  """`table` to `path` whole or not at all (a new file, then renamed)."""
  tmp = path.with_name(path.name + '.tmp')
  table.to_csv(tmp, index=False, **kwargs)
  tmp.replace(path)


def _write_text(path: pathlib.Path, text: str) -> None:
  tmp = path.with_name(path.name + '.tmp')
  tmp.write_text(text)
  tmp.replace(path)


def _in_order(table: pd.DataFrame) -> pd.DataFrame:
  """`table`'s rows with the conditions in CONDITIONS' order (stable
  within one), the others after."""
  order = {name: i for i, name in enumerate(CONDITIONS)}
  rank = table['condition'].map(order).fillna(len(order))
  return table.iloc[rank.argsort(kind='stable')].reset_index(drop=True)


# (keys, y label, y scale) of each row of the figure.
PANELS = (
  (('pi_entropy', 'pi_hat_entropy'), 'entropy (ln 3 = 1.10)', 'linear'),
  (('kl_target_policy',), 'KL(target || policy)', 'log'),
  (
    ('pi_hat_spread', 'pi_spread', 'y_spread', 'y_hat_spread', 'z_spread'),
    'spread over the batch (TV)',
    'log',
  ),
  (('push_adv_corr',), 'corr(target push on a_t, advantage)', 'linear'),
)


def _figure(table, plateau_table, path: pathlib.Path, game: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  conditions = list(dict.fromkeys(table['condition']))
  fig, axes = plt.subplots(
    len(PANELS), len(conditions), figsize=(4 * len(conditions), 9),
    squeeze=False, sharex=True,
  )  # fmt: skip
  for j, name in enumerate(conditions):
    part = table[table['condition'] == name]
    for i, (keys, label, scale) in enumerate(PANELS):
      ax = axes[i, j]
      ax.set_yscale(scale)
      for key in keys:
        wide = part.pivot_table(index='updates', columns='seed', values=key)
        ax.plot(wide.index, wide.mean(axis=1), label=key)
        ax.fill_between(
          wide.index, wide.min(axis=1), wide.max(axis=1), alpha=0.25
        )
      ends = plateau_table[plateau_table['condition'] == name]['plateau']
      for end in ends.dropna():
        ax.axvline(end, color='grey', lw=0.6, ls=':')
      if j == 0:
        ax.set_ylabel(label)
      if i == 0:
        ax.set_title(name)
      if i == len(PANELS) - 1:
        ax.set_xlabel('learner updates')
      if j == len(conditions) - 1:
        ax.legend(fontsize=6)
  fig.suptitle(
    f"Disco103's targets on {GAMES[game]}, seeds 0-2 (line: mean, band: "
    'min-max; '
    "dotted: each seed's plateau end)",
    fontsize=9,
  )
  fig.tight_layout()
  tmp = path.with_name(path.name + '.tmp')
  fig.savefig(tmp, dpi=90, format='png')
  tmp.replace(path)
  plt.close(fig)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('out', type=pathlib.Path)
  parser.add_argument('conditions', nargs='*', help=f'of {list(CONDITIONS)}')
  parser.add_argument('--tiny', action='store_true')
  parser.add_argument('--game', choices=('catch', 'breakout'), default='catch')
  parser.add_argument('--report', type=pathlib.Path, metavar='DIR')
  args = parser.parse_args(argv)
  unknown = [n for n in args.conditions if n not in CONDITIONS]
  if unknown:
    parser.error(f'unknown conditions {unknown}; of {list(CONDITIONS)}')
  for name in args.conditions:
    run_condition(args.out, name, args.tiny, args.game)
  if args.report:
    try:
      report(args.out, args.report, args.game)
    except ValueError as e:  # A cut table of the report: one line.
      print(f'error: {e}', file=sys.stderr)
      return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
