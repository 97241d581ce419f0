#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Disco103's plateau: for how many learner updates its return stays near
random play, and what that depends on.

On Catch 8x8 with the upstream eval's settings (MLP 512x512, 2 environments,
batch 64, replay ratio 32, buffer 1,024, Adam 1e-2), Disco103, seeds 0-2 in
one program per condition, `--updates` learner updates (1,000):

  base        the upstream eval's settings
  lr_3e-3     learning rate 3e-3 (one third)
  lr_3e-2     learning rate 3e-2 (three times)
  batch_16    batch 16 (replay ratio 8: still 2 environments, buffer 256)
  warm_rule   as base, but each fresh agent starts with the rule's
              per-agent state (the meta-network's recurrent state and the
              advantage and TD normalisation EMAs) of the base agent of its
              seed after its last update; its network, optimiser and target
              network are fresh
  warm_rnn    as warm_rule, the recurrent state only

and, from the MinAtar study's committed per-run curves
(docs/results/minatar, `studies/minatar.py`), Disco103 on Breakout at the
sweep's three learning rates and on every game at the chosen one.

Per run: the plateau's length, the first update at which the return (a
moving mean) is half way from its start (the mean over the first 5% of the
updates) to its end (the last 10%); NaN where the end is not above the
start (nothing learned) or the moving mean never gets there. And the first
update from which the policy's entropy (a moving mean) stays below 90% of
ln(actions): where the policy leaves uniform for good. Both are computed
from the committed curves, so the tables can be made again from them.
Writes to --results: per condition curves.csv and
summary.json, plateau.csv/.md (every run and condition), plateau.png
(Catch: return and entropy against updates) and plateau_minatar.png (the
MinAtar runs, one column per game).

  python scripts/study_plateau.py
  python scripts/study_plateau.py --tiny --results /tmp/p
"""

import argparse
import json
import math
import pathlib
import shlex
import sys
import time
import warnings

import comparison  # scripts/comparison.py, beside this script
import numpy as np

from disco_rl import plots

BASE = dict(
  env='jittable_catch',
  env_kwargs=dict(rows=8, columns=8),
  rule='disco_103',
  steps_per_call=50,
  debug_checks=False,
)
# In the order they run: the warm ones right after base, whose final state
# they start from (kept in memory only).
CONDITIONS = {
  'base': {},
  'warm_rule': {},
  'warm_rnn': {},
  'lr_3e-3': dict(learning_rate=3e-3),
  'lr_3e-2': dict(learning_rate=3e-2),
  'batch_16': dict(batch_size=16, replay_ratio=8, buffer_capacity=256),
}
# What a warm condition carries over from the base agents' meta_state.
WARM_KEYS = {
  'warm_rule': ('rnn_state', 'adv_ema_state', 'td_ema_state'),
  'warm_rnn': ('rnn_state',),
}
UPDATES = 1000
SEEDS = (0, 1, 2)
TINY = dict(
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
  batch_size=4,
  replay_ratio=2,
  buffer_capacity=16,
  rollout_len=8,
  steps_per_call=10,
)
TINY_UPDATES = 30
START_FRACTION, END_FRACTION = 0.05, 0.1
WINDOW = 25  # Iterations the moving means span.
UNIFORM_FRACTION = 0.9  # Of ln(actions): the policy has left uniform.


def moving_mean(values: np.ndarray, window: int) -> np.ndarray:
  """The trailing `window`-point mean, NaNs skipped (NaN if all are)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  return (
    pd.Series(np.asarray(values, float))
    .rolling(window, min_periods=1)
    .mean()
    .to_numpy()
  )


def plateau_length(
  updates: np.ndarray, returns: np.ndarray, window: int
) -> tuple[float, float, float]:
  """(updates until the return is half way from start to end, start, end).

  Args:
    updates: [N] learner updates done at each point (non-decreasing).
    returns: [N] mean episode return at each point (NaN: none ended).
    window: points of the moving mean.
  """
  updates = np.asarray(updates, float)
  returns = np.asarray(returns, float)
  total = updates[-1]
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', RuntimeWarning)  # No episode ended.
    start = np.nanmean(returns[updates <= max(total * START_FRACTION, 1)])
    end = np.nanmean(returns[updates > total * (1 - END_FRACTION)])
  if not (np.isfinite(start) and np.isfinite(end)) or end <= start:
    return math.nan, float(start), float(end)
  # A window no longer than the end's stretch, so that the moving mean
  # there is close to `end`.
  stretch = int(np.sum(updates > total * (1 - END_FRACTION)))
  smooth = moving_mean(returns, max(1, min(window, stretch)))
  reached = np.flatnonzero(smooth >= (start + end) / 2)
  if not reached.size:  # The moving mean stayed below: noise at the end.
    return math.nan, float(start), float(end)
  return float(updates[reached[0]]), float(start), float(end)


def leaves_uniform(
  updates: np.ndarray, entropy: np.ndarray, num_actions: int, window: int
) -> float:
  """The first update from which the entropy's moving mean stays below
  `UNIFORM_FRACTION` of ln(num_actions) to the end (NaN: it ends above).

  "Stays": an early dip that comes back up (Disco103's entropy on Catch
  falls to about 0.96 in its first 10 updates, then returns to ln 3) does
  not count.
  """
  smooth = moving_mean(entropy, window)
  above = ~(smooth < UNIFORM_FRACTION * math.log(num_actions))  # NaN too.
  if above[-1]:
    return math.nan
  last_above = np.flatnonzero(above)
  first = last_above[-1] + 1 if last_above.size else 0
  return float(np.asarray(updates)[first])


def make_config(condition: str, updates: int, tiny: bool, seeds=SEEDS):
  from disco_rl import EvalConfig  # pylint: disable=g-import-not-at-top

  settings = dict(BASE)
  settings.update(TINY if tiny else {})
  settings.update(CONDITIONS[condition])
  return EvalConfig(
    **settings, seed=seeds[0], num_seeds=len(seeds), num_steps=updates
  )


def train(config, warm_meta_state=None):
  """Runs `config`'s eval job (iterations until `num_steps` updates);
  (per-iteration metrics as metrics.csv columns, the final state)."""
  from disco_rl.loops import eval as eval_lib  # pylint: disable=g-import-not-at-top

  job = eval_lib.make_eval(config)
  state = job.init()
  if warm_meta_state is not None:
    meta = dict(state.learner_state.meta_state, **warm_meta_state)
    state = state.replace(
      learner_state=state.learner_state.replace(meta_state=meta)
    )
  iterations = config.num_steps + job.warmup
  rows, done = [], 0
  while done < iterations:
    count = min(config.steps_per_call, iterations - done)
    state, metrics = job.step(state, count)
    rows += job.rows(metrics, done)
    done += count
    print(f'  iteration {done}/{iterations}', flush=True)
  columns = {k: np.array([r[k] for r in rows], float) for k in rows[0]}
  return columns, state, job.setup.agent.num_actions


def is_done(args, condition: str, updates: int) -> bool:
  """Whether --results holds the condition's run of `updates` (and it is
  not to be overwritten)."""
  done = pathlib.Path(args.results) / condition / 'summary.json'
  return (
    not args.overwrite
    and done.is_file()
    and json.loads(done.read_text())['updates'] == updates
  )


def run_condition(args, condition: str, updates: int, base_meta=None):
  """Trains one condition unless its summary is in --results; (summary,
  the final meta_state of its agents or None if read back)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  results = pathlib.Path(args.results) / condition
  done = results / 'summary.json'
  if is_done(args, condition, updates):
    return json.loads(done.read_text()), None
  config = make_config(condition, updates, args.tiny)
  warm = None
  if condition in WARM_KEYS:
    warm = {k: base_meta[k] for k in WARM_KEYS[condition]}
  start = time.time()
  print(f'{condition}: training', flush=True)
  metrics, state, num_actions = train(config, warm)
  results.mkdir(parents=True, exist_ok=True)
  pd.DataFrame(
    comparison.compact_curves(
      metrics, max(1, updates // comparison.CURVE_POINTS)
    )
  ).to_csv(results / 'curves.csv', index=False, float_format='%.6g')
  summary = dict(
    condition=condition,
    settings=CONDITIONS[condition],
    carried=list(WARM_KEYS.get(condition, ())),
    updates=updates,
    num_actions=num_actions,
    seeds=config.num_seeds,
    wall_s=round(time.time() - start, 1),
  )
  done.write_text(json.dumps(summary, indent=1) + '\n')
  # On the host: the job donates its state's buffers to the next call.
  import jax  # pylint: disable=g-import-not-at-top

  meta = jax.device_get(
    {
      k: v
      for k, v in state.learner_state.meta_state.items()
      if k != 'target_params'
    }
  )
  return summary, meta


def measure_run(
  updates, returns, entropy, num_actions: int, window: int
) -> dict:
  """One run's plateau, start and end returns, and where its policy leaves
  uniform.

  The plateau counts only once the policy has left uniform for good: a
  run whose policy stays uniform has not ended its plateau, whatever the
  noise of its returns (NaN, as for a run whose return did not rise).
  """
  length, begin, end = plateau_length(updates, returns, window)
  leave = leaves_uniform(updates, entropy, num_actions, window)
  if math.isnan(leave):
    length = math.nan
  return dict(plateau=length, start=begin, end=end, leaves_uniform=leave)


def measure_rows(
  setting: str, path: pathlib.Path, num_actions: int
) -> list[dict]:
  """Per seed, `measure_run` of a run's committed curves (points of several
  iterations each: the moving means span about `WINDOW` iterations)."""
  rows = []
  for seed, c in comparison.read_curves(path).items():
    per_point = max(
      1.0, float(np.median(np.diff(c['step']))) if len(c['step']) > 1 else 1.0
    )
    window = max(1, round(WINDOW / per_point))
    rows.append(
      dict(
        setting=setting,
        seed=seed,
        **measure_run(
          c['updates'], c['avg_return'], c['entropy'], num_actions, window
        ),
      )
    )
  return rows


def minatar_runs(
  results: pathlib.Path,
) -> list[tuple[str, str, float, pathlib.Path]]:
  """Disco103's committed MinAtar runs: (game, 'table' or 'sweep', learning
  rate, run directory), sorted by path."""
  runs = []
  for path in sorted(results.glob('**/disco_103/lr_*/curves.csv')):
    summary = json.loads((path.parent / 'summary.json').read_text())
    game = summary['env'].split(':')[1].replace('-MinAtar', '')
    study = 'sweep' if 'sweep' in path.parts else 'table'
    runs.append((game, study, summary['learning_rate'], path.parent))
  return runs


def minatar_rows(results: pathlib.Path) -> list[dict]:
  """Plateau rows of Disco103's committed MinAtar runs."""
  rows = []
  for game, study, rate, path in minatar_runs(results):
    rows += measure_rows(
      f'MinAtar {game}, lr {rate:g} ({study})', path, _minatar_actions(game)
    )
  return rows


def _minatar_actions(game: str) -> int:
  # gymnax's MinAtar action sets (the minimal ones).
  return {
    'Asterix': 5,
    'Breakout': 3,
    'Freeway': 3,
    'Seaquest': 6,
    'SpaceInvaders': 4,
  }[game]


def _stacked(path: pathlib.Path, keys) -> tuple[np.ndarray, list]:
  """A run's updates and its seeds' curves [seeds, points] per key, cut to
  the shortest seed."""
  curves = comparison.read_curves(path)
  length = min(len(c['updates']) for c in curves.values())
  x = next(iter(curves.values()))['updates'][:length]
  return x, [np.stack([c[k][:length] for c in curves.values()]) for k in keys]


def _subplots(rows: int, columns: int, size):
  """(figure, [rows, columns] axes) drawn off-screen (Agg), shared x."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  return plt.subplots(rows, columns, figsize=size, sharex=True, squeeze=False)


def _save(fig, path: pathlib.Path, title: str, dpi: int) -> pathlib.Path:
  """`fig` with its title saved as PNG to `path`, and closed."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path


def plot(results: pathlib.Path, conditions) -> pathlib.Path:
  """plateau.png: return (top) and entropy (bottom) against updates, the
  mean over seeds with a 95% bootstrap band, per condition."""
  fig, axes = _subplots(2, 1, (8, 7))
  axes = axes[:, 0]
  for i, condition in enumerate(conditions):
    x, ys = _stacked(results / condition, ('avg_return', 'entropy'))
    for ax, y in zip(axes, ys, strict=False):
      # Conditions of one rule: colours no rule has (`plots.RULE_COLOURS`).
      comparison.draw_band(
        ax, x, y, condition, alpha=0.2, colour=plots.other_colour(i)
      )
  axes[0].set_ylabel('episode return')
  axes[1].set_ylabel('policy entropy')
  axes[1].axhline(math.log(3), color='gray', linestyle=':', label='ln 3')
  axes[1].set_xlabel('learner updates')
  for ax in axes:
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
  return _save(
    fig,
    results / 'plateau.png',
    'Disco103 on Catch 8x8: mean over seeds, 95% bootstrap band',
    dpi=100,
  )


def plot_minatar(
  results: pathlib.Path, minatar: pathlib.Path
) -> pathlib.Path | None:
  """plateau_minatar.png: Disco103's committed MinAtar runs, one column per
  game: return (top) and entropy over ln(actions) (bottom, 1 = uniform)
  against updates, mean over seeds with a 95% bootstrap band, one line per
  learning rate and study (None if there are no runs). A point where no
  episode ended (most of Freeway's: its episodes last 2,500 steps) shows the
  seed's last return."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  runs = minatar_runs(minatar)
  games = sorted({game for game, *_ in runs})
  if not games:
    return None
  fig, axes = _subplots(2, len(games), (4.5 * len(games), 6.5))
  colours = {}  # Per learning rate and study, the same in every column.
  for game, study, rate, path in runs:
    column = games.index(game)
    colour = colours.setdefault((study, rate), plots.other_colour(len(colours)))
    x, (returns, entropy) = _stacked(path, ('avg_return', 'entropy'))
    returns = pd.DataFrame(returns.T).ffill().to_numpy().T
    label = f'lr {rate:g} ({study}, {returns.shape[0]} seeds)'
    comparison.draw_band(
      axes[0, column], x, returns, label, alpha=0.2, colour=colour
    )
    comparison.draw_band(
      axes[1, column],
      x,
      entropy / math.log(_minatar_actions(game)),
      label,
      alpha=0.2,
      colour=colour,
    )
  for column, game in enumerate(games):
    axes[0, column].set_title(game)
    axes[1, column].axhline(
      UNIFORM_FRACTION,
      color='gray',
      linestyle=':',
      label=f'{UNIFORM_FRACTION:g} (leaves uniform)',
    )
    axes[1, column].set_xlabel('learner updates')
    for ax in axes[:, column]:
      ax.grid(alpha=0.3)
      ax.legend(fontsize=7)
  axes[0, 0].set_ylabel('episode return')
  axes[1, 0].set_ylabel('policy entropy / ln(actions)')
  return _save(
    fig,
    results / 'plateau_minatar.png',
    'Disco103 on MinAtar: mean over seeds, 95% bootstrap band',
    dpi=90,
  )


def write_tables(
  results: pathlib.Path, summaries, minatar: pathlib.Path, command: str
) -> None:
  import pandas as pd  # pylint: disable=g-import-not-at-top

  rows = []
  for s in summaries:
    rows += measure_rows(
      f'Catch 8x8, {s["condition"]}',
      results / s['condition'],
      s.get('num_actions', 3),
    )
  rows += minatar_rows(minatar)
  table = pd.DataFrame(rows)
  table.to_csv(results / 'plateau.csv', index=False, float_format='%.4g')
  lines = [
    'Updates until the return is half way from its start to its end '
    '(plateau), and until the policy entropy falls below 90% of '
    'ln(actions) (leaves uniform); per run, mean over seeds (n/a: '
    'the return did not rise, or the policy never left uniform for '
    'good: the plateau outlasted the run).',
    '',
    '| setting | seeds | plateau (mean) | per seed | leaves uniform '
    '(mean) | return start -> end |',
    '|---|---|---|---|---|---|',
  ]
  fmt = lambda v: 'n/a' if not np.isfinite(v) else f'{v:.0f}'
  for setting, group in table.groupby('setting', sort=False):
    plateau = group['plateau'].to_numpy(float)
    uniform = group['leaves_uniform'].to_numpy(float)
    lines.append(
      f'| {setting} | {len(group)} | '
      f'{fmt(np.nanmean(plateau)) if np.isfinite(plateau).any() else "n/a"}'
      f' | {", ".join(fmt(v) for v in plateau)} | '
      f'{fmt(np.nanmean(uniform)) if np.isfinite(uniform).any() else "n/a"}'
      f' | {group["start"].mean():.2f} -> {group["end"].mean():.2f} |'
    )
  lines += ['', f'Command: `{command}`', '']
  (results / 'plateau.md').write_text('\n'.join(lines))
  print('\n'.join(lines), flush=True)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument(
    '--conditions',
    nargs='+',
    default=list(CONDITIONS),
    choices=list(CONDITIONS),
  )
  parser.add_argument('--updates', type=int, default=None)
  parser.add_argument('--results', default='docs/results/plateau')
  parser.add_argument(
    '--minatar-results',
    default='docs/results/minatar',
    help="the MinAtar benchmark's results (read only)",
  )
  parser.add_argument('--overwrite', action='store_true')
  parser.add_argument('--tiny', action='store_true')
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  try:
    updates = args.updates or (TINY_UPDATES if args.tiny else UPDATES)
    if updates < 1:
      raise ValueError(f'--updates must be >= 1, got {updates}.')
    results = pathlib.Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    summaries, base_meta = [], None
    for condition in [c for c in CONDITIONS if c in args.conditions]:
      if (
        condition in WARM_KEYS
        and base_meta is None
        and not is_done(args, condition, updates)
      ):
        # The base agents' final rule state: train base again if it was read
        # back (its state is not kept).
        _, base_meta = run_condition(
          argparse.Namespace(**dict(vars(args), overwrite=True)),
          'base',
          updates,
        )
      summary, meta = run_condition(args, condition, updates, base_meta)
      if condition == 'base' and meta is not None:
        base_meta = meta
      summaries.append(summary)
    write_tables(
      results,
      summaries,
      pathlib.Path(args.minatar_results),
      'python scripts/study_plateau.py '
      + ' '.join(shlex.quote(a) for a in argv),
    )
    print(f'plot: {plot(results, [s["condition"] for s in summaries])}')
    minatar_png = plot_minatar(results, pathlib.Path(args.minatar_results))
    if minatar_png is not None:
      print(f'plot: {minatar_png}')
  except (ValueError, FileNotFoundError) as e:
    print(f'error: {str(e).splitlines()[0]}', file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
