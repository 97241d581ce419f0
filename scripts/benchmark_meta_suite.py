#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A rule meta-trained on a task suite, evaluated on held-out environments.

1. Meta-trains a rule from random parameters on a small suite (`--suite`,
   default: Catch 5x5, Catch 7x5 and gymnax CartPole-v1), the population
   split over the tasks (`MetaTrainConfig.tasks`): out/meta/. The settings:
   a preset (`--meta-preset`, default the upstream notebook's), this
   script's population, then any field given with `--meta-set NAME=VALUE`
   (e.g. `agent_lifetime=200 dense=128,128`). `--meta-init NPZ` starts
   from a rule an earlier run meta-trained (its out/meta/
   update_rule_params.npz) instead of a fresh meta-network: a second stage,
   e.g. with lifetimes, whose budget adds the first's.
2. Trains fresh agents with the learned rule, with Disco103 and with the
   actor-critic baseline on environments the suite does not hold
   (`--held-out`, default: Catch 8x8 and bsuite's Catch in gymnax, a 10x5
   board), several seeds each (in parallel, one program per environment
   and rule), in one or both evaluation settings
   (`--eval-settings`): 'eval', one setting for every rule (the eval job's
   agent learning rate 1e-2, replay); 'meta', the setting the rule was
   meta-trained in (its agents' learning rate, network, batch of
   environments and rollout length; each learner step on the batch just
   acted, sampled from a buffer of that batch). Output:
   out/eval_<setting>/<env>/<rule>/ (the meta-training run is out/meta/).
   With `--tune-rates`, each rule's agent learning rate is first chosen,
   per setting, on the suite's own environments (never the held-out ones;
   `choose_rates`): every rule trains at every rate on every suite task
   (seeds `--tune-seeds`, apart from the evaluation seeds); per task, a
   rate's mean final return is normalised from random play (0) to the best
   mean of any rule and rate there (1); the rule's rate is the one with
   the highest mean of those over the tasks. The held-out runs then train
   each rule at its rate: out/tune_<setting>/<env>/<rule>/lr_<rate>/,
   tuning.csv (written as the runs end) and tuning.md. `--tune-only`
   stops there, so that some rules can be tuned before others (a rule's
   rate depends on every rule's runs: the held-out runs wait for all).
   `--learned NPZ` evaluates a rule meta-trained before (no meta-training;
   --meta-preset/--meta-set still define the 'meta' setting).
3. Writes meta_tasks.png (each task's reward per step against meta-steps;
   with --meta-init, the first stage's run before it when its metrics.csv
   is beside the npz), curves_<setting>_<env>.png (mean return and 95%
   bootstrap band over seeds against environment steps, random play's
   return dashed; curves.png: all of them, a row per setting), results.csv
   and results.md (final return: mean return of the episodes ending in the
   last 10% of steps, the mean over seeds and their range) and the
   command (command.txt).
   These small outputs go to `--results` (default: --out), with per
   held-out run its compact curves and final returns
   (<eval_setting>/<env>/<rule>[/lr_<rate>]/curves.csv, finals.json,
   run.json) and
   random_returns.json, so they can be committed; `--report` redraws the
   tables and plots from them alone (the same command, plus --report).

Runs that finished are read back and interrupted ones resume, so an
interrupted benchmark continues where it stopped. A new machine, with only
the committed --results, continues too: a tuning run with a row in
tuning.csv (same setting, task, rule, rate, steps and seeds) and a
held-out run whose saved files (run.json, finals.json) have the same
settings are not trained again (`--overwrite` trains them again).

  python scripts/benchmark_meta_suite.py --meta-steps 600 --seeds 0 1 2
  python scripts/benchmark_meta_suite.py --meta-set agent_lifetime=200 \
      --eval-settings meta --out runs/meta_suite_lifetimes
  python scripts/benchmark_meta_suite.py --meta-init \
      runs/bench_meta_suite/meta/update_rule_params.npz \
      --meta-set agent_lifetime=1000 num_agents=6 --out runs/meta_suite_stage2
  python scripts/benchmark_meta_suite.py --tiny --out runs/meta_suite_tiny
  python scripts/benchmark_meta_suite.py --learned \
      docs/results/meta_suite_cpu/stage2/update_rule_params.npz \
      --tune-rates 3e-4 1e-3 3e-3 1e-2 3e-2 --eval-settings eval meta \
      --eval-steps 3000 --out runs/meta_suite_stage2_tuned \
      --results docs/results/meta_suite_cpu/stage2_tuned [--report]
"""

import argparse
import dataclasses
import json
import pathlib
import shlex
import sys
import time

import comparison  # scripts/comparison.py, beside this script
import numpy as np

from disco_rl import plots
from disco_rl.examples import flags
from disco_rl.examples import meta_train as meta_train_command
from disco_rl.loops import config as config_lib
from disco_rl.loops import run_dir as run_files
from disco_rl.loops import trainer

SUITE = (
  'catch[rows=5,columns=5]',
  'catch[rows=7,columns=5]',
  'gymnax:CartPole-v1',
)
HELD_OUT = ('catch[rows=8,columns=8]', 'gymnax:Catch-bsuite')
RULES = ('learned', 'disco_103', 'actor_critic')
RULE_LABELS = {rule: plots.RULE_NAMES[rule] for rule in RULES}
# Meta-training: the upstream notebook's settings (with which a random rule
# learns Catch 5x5 in 800 meta-steps), one agent per task. No debug checks
# (Catch's and CartPole's rewards and the sampled actions are in range).
META = dict(num_agents=3, debug_checks=False, steps_per_call=10)
# Evaluation: one setting for every environment and rule, smaller than the
# eval notebook's (512x512 MLP, 64 trajectories) so that the runs fit a
# small machine: 32 trajectories of 29 steps per learner step, replay ratio
# 16 (2 environments acting), a 128x128 MLP.
EVAL = dict(
  batch_size=32,
  replay_ratio=16,
  buffer_capacity=512,
  dense=(128, 128),
  model_lstm_size=64,
  model_head_hiddens=(64,),
  num_steps=1000,
  steps_per_call=50,
  debug_checks=False,
)
# --tiny: the whole pipeline in minutes.
TINY_META = dict(
  META,
  batch_size_per_device=4,
  rollout_len=4,
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
  value_dense=(8,),
  steps_per_call=2,
)
TINY_EVAL = dict(
  EVAL,
  batch_size=8,
  replay_ratio=4,
  buffer_capacity=32,
  rollout_len=5,
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
  num_steps=20,
  steps_per_call=5,
)
FINAL_FRACTION = 0.1
TUNE_SEEDS = (100, 101, 102)
EVAL_SETTINGS = ('eval', 'meta')


def meta_config(
  preset: str, settings: dict, overrides: dict, **fields
) -> config_lib.MetaTrainConfig:
  """The meta-training config: the preset, then this script's `settings`
  (population, sizes at --tiny), then `overrides` (--meta-set), then
  `fields` (steps, suite, seed)."""
  values = dict(meta_train_command.PRESETS[preset])
  values.update(settings)
  values.update(overrides)
  values.update(fields)
  return config_lib.MetaTrainConfig(**values)


def meta_train(
  out: pathlib.Path,
  config: config_lib.MetaTrainConfig,
  overwrite: bool,
  init_params=None,
) -> pathlib.Path:
  """Meta-trains the rule (resuming an interrupted run); its .npz path.

  `init_params`: the starting rule (None: per `config.init`); a resumed
  run continues from its checkpoint's.
  """
  path = out / 'meta'
  done = path / 'summary.json'
  if done.is_file() and not overwrite:
    summary = json.loads(done.read_text())
    if not summary.get('interrupted') and summary['steps'] == config.num_steps:
      return pathlib.Path(summary['params_npz'])
  checkpoints = path / run_files.CHECKPOINTS
  resume = not overwrite and checkpoints.is_dir() and any(checkpoints.iterdir())
  run = trainer.Trainer(
    config,
    path,
    resume=resume,
    overwrite=not resume,
    progress=True,
    rule_params=None if resume else init_params,
  )
  summary = run.fit()
  run.close()
  if summary.get('interrupted'):
    raise comparison.Interrupted(
      f'meta-training interrupted ({summary["interrupted"]}); run the '
      'same command again to resume.'
    )
  return pathlib.Path(summary['params_npz'])


def meta_eval_settings(
  meta: config_lib.MetaTrainConfig, settings: dict
) -> dict:
  """The eval settings of the 'meta' setting: `settings` (steps, calls)
  with the agents of `meta`: learning rate, network, rollout length, and
  one learner step per acted batch of `batch_size_per_device` environments
  (replay ratio 1, a buffer of that batch)."""
  return dict(
    settings,
    learning_rate=meta.learning_rate,
    net=meta.net,
    dense=meta.dense,
    model_lstm_size=meta.model_lstm_size,
    model_head_hiddens=meta.model_head_hiddens,
    rollout_len=meta.rollout_len,
    batch_size=meta.batch_size_per_device,
    replay_ratio=1,
    buffer_capacity=meta.batch_size_per_device,
    **meta.torso(),
  )


def eval_config(env_task: str, rule: str, seeds, settings: dict):
  """The eval job's settings for one held-out task and rule: the
  (consecutive) `seeds` in parallel, in one program."""
  seeds = list(seeds)
  task = config_lib.parse_task(env_task)
  config = config_lib.EvalConfig(
    **{**settings, **task.eval_settings()}, seed=seeds[0], num_seeds=len(seeds)
  )
  return dataclasses.replace(
    config, rule='actor_critic' if rule == 'actor_critic' else 'disco_103'
  )


def env_dir_name(env_task: str) -> str:
  return ''.join(c if c.isalnum() or c in '-_' else '_' for c in env_task)


def rate_dir_name(rate: float) -> str:
  return f'lr_{rate:g}'


def choose_rates(
  rows, randoms: dict[str, float]
) -> tuple[dict[tuple[str, str], float], list[dict]]:
  """Each rule's learning rate per setting, from the suite's runs.

  Per setting and task, a (rule, rate)'s mean final return x is scored
  (x - random) / (best - random): `randoms[task]` is random play's return,
  best the highest mean of any rule and rate on that task in that setting
  (a task where nothing beat random play scores 0). A rule's rate is the
  one with the highest mean score over the tasks (the lower rate on a tie).

  Args:
    rows: dicts with setting, env, rule, learning_rate, final_return_mean.
    randoms: random play's mean return per env.

  Returns:
    ({(setting, rule): rate}, [dict(setting, rule, learning_rate, score)]).
  """
  import pandas as pd  # pylint: disable=g-import-not-at-top

  table = pd.DataFrame(rows)
  missing = sorted(set(table['env']) - set(randoms))
  if missing:
    raise ValueError(f'randoms has no random-play return for {missing}.')
  best = table.groupby(['setting', 'env'])['final_return_mean'].transform('max')
  floor = table['env'].map(randoms)
  span = best - floor
  table['score'] = np.where(
    span > 0, (table['final_return_mean'] - floor) / span.where(span > 0), 0.0
  )
  scores = (
    table.groupby(['setting', 'rule', 'learning_rate'])['score']
    .mean()
    .reset_index()
  )
  chosen = {}
  for (setting, rule), group in scores.groupby(['setting', 'rule']):
    group = group.sort_values('learning_rate')
    chosen[setting, rule] = float(
      group['learning_rate'].iloc[int(np.argmax(group['score'].values))]
    )
  return chosen, scores.to_dict('records')


def tune(
  out: pathlib.Path, args, suite, settings: dict, learned
) -> dict[tuple[str, str], float]:
  """Trains (or reads back) every rule at every `--tune-rates` rate on
  every suite task, per setting; writes tuning.csv and tuning.md and
  returns the chosen rates (`choose_rates`).

  Raises:
    comparison.Interrupted: a run stopped by a signal.
  """
  randoms = random_returns(args.results, suite)
  if args.report:
    rows = read_tuning(args.results / 'tuning.csv')
  else:
    rows = train_tuning_runs(out, args, suite, settings, learned)
  chosen, scores = choose_rates(rows, randoms)
  write_tuning(args.results, rows, scores, chosen, randoms, args)
  return chosen


def random_returns(results: pathlib.Path, tasks) -> dict[str, float]:
  """{task: random play's mean return} (`comparison.random_return`, 32
  environments) for `tasks`, kept in results/random_returns.json: read
  from there, the missing ones played and added."""
  path = results / 'random_returns.json'
  randoms = json.loads(path.read_text()) if path.is_file() else {}
  missing = [t for t in tasks if t not in randoms]
  for env_task in missing:
    randoms[env_task] = comparison.random_return(
      config_lib.parse_task(env_task).make_env(32)
    )
  if missing:
    path.write_text(json.dumps(randoms, indent=1) + '\n')
  return {t: randoms[t] for t in tasks}


def train_tuning_runs(out, args, suite, settings, learned) -> list[dict]:
  """Every rule at every rate on every suite task, per setting: a row per
  run (tuning.csv's, rewritten as each ends)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  kept = {}
  if (args.results / 'tuning.csv').is_file() and not args.overwrite:
    kept = {
      tuning_key(row): row for row in read_tuning(args.results / 'tuning.csv')
    }
  rows = []
  for setting in args.eval_settings:
    for rule in args.rules:
      for rate in args.tune_rates:
        for env_task in suite:
          row = dict(
            setting=setting,
            env=env_task,
            rule=rule,
            learning_rate=rate,
            steps=args.tune_steps,
            first_seed=args.tune_seeds[0],
            seeds=len(args.tune_seeds),
            rule_sha256=rule_sha256(args, rule),
          )
          if tuning_key(row) in kept:  # Committed by an earlier session.
            rows.append(kept[tuning_key(row)])
            continue
          path = (
            out
            / f'tune_{setting}'
            / env_dir_name(env_task)
            / rule
            / rate_dir_name(rate)
          )
          config = dataclasses.replace(
            eval_config(env_task, rule, args.tune_seeds, settings[setting]),
            learning_rate=rate,
            num_steps=args.tune_steps,
          )
          finals = run_finals(
            path,
            config,
            args,
            learned,
            rule,
            args.tune_seeds,
            f'[tune {setting}] {env_task} lr {rate:g}',
          )
          rows.append(
            dict(
              row,
              final_return_mean=float(np.mean(finals)),
              final_returns=finals,
            )
          )
          pd.DataFrame(rows).to_csv(
            args.results / 'tuning.csv', index=False
          )  # So far.
  return rows


def tuning_key(row: dict) -> tuple | None:
  """What makes two tuning runs the same: setting, task, rule, rate,
  learner steps, seeds and, for the learned rule, its parameters' sha256
  (a row without one of these matches none)."""

  def given(name):
    value = row.get(name)
    return value is not None and value == value and value != ''  # NaN, ''.

  if not (given('steps') and given('first_seed')) or (
    row['rule'] == 'learned' and not given('rule_sha256')
  ):
    return None
  return (
    row['setting'],
    row['env'],
    row['rule'],
    float(row['learning_rate']),
    int(row['steps']),
    int(row['first_seed']),
    int(row['seeds']),
    row['rule_sha256'] if row['rule'] == 'learned' else '',
  )


def rule_sha256(args, rule: str) -> str:
  """The learned rule's parameters' sha256 ('' for the other rules), so
  that runs of another learned rule are never read back as its own."""
  return args.rule_sha256 if rule == 'learned' else ''


def read_tuning(path: pathlib.Path) -> list[dict]:
  """tuning.csv's rows (`final_returns` as lists)."""
  import ast  # pylint: disable=g-import-not-at-top

  import pandas as pd  # pylint: disable=g-import-not-at-top

  if not path.is_file():
    raise FileNotFoundError(f'{path}: no tuning runs recorded')
  rows = pd.read_csv(path).to_dict('records')
  for row in rows:
    row['final_returns'] = list(ast.literal_eval(row['final_returns']))
  return rows


def write_tuning(out, rows, scores, chosen, randoms, args) -> None:
  """tuning.csv (every suite run) and tuning.md (the scores, the chosen
  rates)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  pd.DataFrame(rows).to_csv(out / 'tuning.csv', index=False)
  lines = [
    'Learning rates chosen on the meta-training suite '
    f'({", ".join(sorted(randoms))}), seeds {args.tune_seeds}, '
    f'{args.tune_steps} learner steps per run. Score: per task, '
    '(mean final return - random play) / (best mean of any rule and rate '
    '- random play), averaged over the tasks; the rate with the highest '
    "score is the rule's.",
    '',
    'Random play: '
    + ', '.join(f'{k} {v:.3f}' for k, v in sorted(randoms.items())),
    '',
    '| setting | rule | '
    + ' | '.join(f'{r:g}' for r in args.tune_rates)
    + ' | chosen |',
    '|---|---|' + '---|' * (len(args.tune_rates) + 1),
  ]
  table = {
    (r['setting'], r['rule'], r['learning_rate']): r['score'] for r in scores
  }
  for setting in args.eval_settings:
    for rule in args.rules:
      cells = [f'{table[setting, rule, r]:.3f}' for r in args.tune_rates]
      lines.append(
        f'| {setting} | {RULE_LABELS[rule]} | '
        + ' | '.join(cells)
        + f' | {chosen[setting, rule]:g} |'
      )
  lines += [
    '',
    'Per task (mean final return over the seeds):',
    '',
    '| setting | task | rule | '
    + ' | '.join(f'{r:g}' for r in args.tune_rates)
    + ' |',
    '|---|---|---|' + '---|' * len(args.tune_rates),
  ]
  means = {
    (r['setting'], r['env'], r['rule'], r['learning_rate']): r[
      'final_return_mean'
    ]
    for r in rows
  }
  for setting in args.eval_settings:
    for env_task in sorted(randoms):
      for rule in args.rules:
        lines.append(
          f'| {setting} | {env_task} | {RULE_LABELS[rule]} | '
          + ' | '.join(
            f'{means[setting, env_task, rule, r]:.3f}' for r in args.tune_rates
          )
          + ' |'
        )
  (out / 'tuning.md').write_text('\n'.join(lines) + '\n')


def run_finals(path, config, args, learned, rule, seeds, label) -> list[float]:
  """Trains (or reads back) one program of seeds; their final returns."""
  begin = time.time()
  summary = comparison.run_or_resume(
    config,
    path,
    args.overwrite,
    rule_params=learned if rule == 'learned' else None,
  )
  if summary.get('interrupted') or summary['steps'] != config.num_steps:
    raise comparison.Interrupted(
      f'{path} stopped ({summary.get("interrupted")}); run the same '
      'command again to resume.'
    )
  runs = comparison.read_seed_curves(path)
  finals = [comparison.final_return(runs[s], FINAL_FRACTION) for s in seeds]
  print(
    f'{label} {rule} seeds {list(seeds)}: final returns '
    + ', '.join(f'{x:.3f}' for x in finals)
    + f' | {summary["steps_per_second"]:.2f} steps/s | '
    f'{time.time() - begin:.0f}s | {path}',
    flush=True,
  )
  return finals


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument(
    '--suite',
    nargs='+',
    default=list(SUITE),
    help='meta-training tasks (MetaTrainConfig.tasks)',
  )
  parser.add_argument(
    '--held-out',
    nargs='+',
    default=list(HELD_OUT),
    help='evaluation tasks, none of them in the suite',
  )
  parser.add_argument('--meta-steps', type=int, default=600)
  parser.add_argument('--meta-seed', type=int, default=4)
  parser.add_argument(
    '--meta-init',
    default=None,
    metavar='NPZ',
    help='start meta-training from this rule (an earlier '
    "run's meta/update_rule_params.npz; default: a fresh "
    'meta-network)',
  )
  parser.add_argument(
    '--meta-preset',
    default='notebook',
    choices=tuple(meta_train_command.PRESETS),
    help='meta-training settings to start from',
  )
  parser.add_argument(
    '--meta-set',
    nargs='+',
    default=[],
    metavar='NAME=VALUE',
    type=lambda a: flags.field_value(config_lib.MetaTrainConfig, a),
    help='MetaTrainConfig fields over the preset, e.g. agent_lifetime=200 '
    'dense=128,128 learning_rate=1e-3',
  )
  parser.add_argument(
    '--eval-settings',
    nargs='+',
    default=['eval'],
    choices=EVAL_SETTINGS,
    help="'eval': the eval job's agents (learning rate "
    "1e-2, replay); 'meta': the meta-training agents",
  )
  parser.add_argument(
    '--eval-steps',
    type=int,
    default=None,
    help='learner steps per evaluation run (default: '
    f'{EVAL["num_steps"]}; --tiny {TINY_EVAL["num_steps"]})',
  )
  parser.add_argument(
    '--rules',
    nargs='+',
    default=list(RULES),
    choices=RULES,
    help="without 'learned', no meta-training: the baselines only",
  )
  parser.add_argument(
    '--learned',
    default=None,
    metavar='NPZ',
    help="evaluate this rule (a meta-training run's "
    'update_rule_params.npz) as the learned rule: no '
    'meta-training',
  )
  parser.add_argument(
    '--tune-rates',
    type=float,
    nargs='+',
    default=None,
    metavar='RATE',
    help="choose each rule's agent learning rate among "
    "these, per setting, on the suite's tasks (default: "
    "every rule at its setting's rate)",
  )
  parser.add_argument(
    '--tune-seeds',
    type=int,
    nargs='+',
    default=list(TUNE_SEEDS),
    help='seeds of the tuning runs (consecutive, none of --seeds)',
  )
  parser.add_argument(
    '--tune-steps',
    type=int,
    default=None,
    help='learner steps per tuning run (default: those of the evaluation runs)',
  )
  parser.add_argument(
    '--tune-only',
    action='store_true',
    help='train the tuning runs, write tuning.md and stop '
    '(no held-out runs): rules tuned on one machine, '
    'others on another, their rows joined in --results '
    'before the held-out runs',
  )
  parser.add_argument(
    '--results',
    default=None,
    metavar='DIR',
    help='where the small outputs go, the ones meant for '
    'the repository (tables, plots, per run its compact '
    'curves and final returns; default: --out)',
  )
  parser.add_argument(
    '--report',
    action='store_true',
    help='train nothing: the tables and plots again from --results alone',
  )
  parser.add_argument(
    '--tiny',
    action='store_true',
    help='smoke run: tiny networks, 4 meta-steps, 20 '
    'learner steps per evaluation run',
  )
  comparison.add_run_flags(parser, 'runs/bench_meta_suite')
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  for flag, seeds in (
    ('--seeds', args.seeds),
    ('--tune-seeds', args.tune_seeds),
  ):
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
      parser.error(
        f'{flag} must be consecutive (one program runs them in '
        f'parallel), got {seeds}'
      )
  if args.tune_rates is not None:
    if any(not rate > 0 for rate in args.tune_rates):
      parser.error(f'--tune-rates must be positive, got {args.tune_rates}')
    if set(args.tune_seeds) & set(args.seeds):
      parser.error(
        f'--tune-seeds {args.tune_seeds} and --seeds {args.seeds} '
        'must differ: a rate chosen on the seeds it is reported '
        'on would flatter it'
      )
  if args.tune_only and args.tune_rates is None:
    parser.error('--tune-only needs --tune-rates (the rates to try)')
  if args.learned and args.meta_init:
    parser.error(
      '--learned evaluates a rule without meta-training; '
      '--meta-init starts a meta-training: give one of them'
    )
  suite = [t.spec() for t in config_lib.parse_tasks(args.suite)]
  held_out = [config_lib.parse_task(t).spec() for t in args.held_out]
  overlap = sorted(set(suite) & set(held_out))
  if overlap:
    parser.error(f'held-out tasks {overlap} are in the suite')
  for name in ('num_steps', 'tasks', 'init', 'seed'):
    if name in dict(args.meta_set):
      parser.error(
        f"--meta-set {name}: set it with the script's own flag "
        '(--meta-steps, --suite, --meta-seed, --meta-init)'
      )
  meta_steps = (
    4 if args.tiny and '--meta-steps' not in argv else (args.meta_steps)
  )
  try:
    meta = meta_config(
      args.meta_preset,
      TINY_META if args.tiny else META,
      dict(args.meta_set),
      num_steps=meta_steps,
      tasks=tuple(suite),
      seed=args.meta_seed,
      init='disco_103' if args.meta_init else 'random',
    )
  except ValueError as e:
    parser.error(f'--meta-set: {e}')
  from disco_rl import weights  # pylint: disable=g-import-not-at-top

  init_params = None
  if args.meta_init:
    try:
      init_params = weights.load_disco_103(args.meta_init)
    except (OSError, ValueError) as e:
      parser.error(f'--meta-init: {e}')
  base_eval = dict(TINY_EVAL if args.tiny else EVAL)
  if args.eval_steps is not None:
    base_eval['num_steps'] = args.eval_steps
  if args.tune_steps is None:
    args.tune_steps = base_eval['num_steps']
  if args.learned:
    try:
      learned_params = weights.load_disco_103(args.learned)
    except (OSError, ValueError) as e:
      parser.error(f'--learned: {e}')
  settings = {'eval': base_eval, 'meta': meta_eval_settings(meta, base_eval)}
  out = pathlib.Path(args.out)
  args.results = pathlib.Path(args.results or out)
  args.rule_sha256 = ''  # The learned rule's, once it is known.
  if args.report and not args.results.is_dir():
    parser.error(f'--report: no results in {args.results}')
  if not args.report:
    out.mkdir(parents=True, exist_ok=True)
    args.results.mkdir(parents=True, exist_ok=True)
  import jax  # pylint: disable=g-import-not-at-top

  # A rerun, or a rule of the same program as another's, compiles nothing.
  jax.config.update('jax_compilation_cache_dir', str(out / 'jax_cache'))
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)

  start = time.time()
  learned, meta_summary = None, None
  try:
    if args.report:
      if 'learned' in args.rules and not args.learned:
        meta_summary = json.loads(
          (args.results / 'meta_summary.json').read_text()
        )
    elif 'learned' in args.rules and args.learned:
      learned = learned_params
      args.rule_sha256 = weights.sha256_of(args.learned)
    elif 'learned' in args.rules:  # The baselines need no meta-training.
      params_path = meta_train(out, meta, args.overwrite, init_params)
      print(
        f'meta-trained rule: {params_path} ({time.time() - start:.0f}s)',
        flush=True,
      )
      stages = [('from --meta-init', out / 'meta')]
      first = pathlib.Path(args.meta_init or '').parent
      if args.meta_init and (first / 'metrics.csv').is_file():
        stages.insert(0, ('first stage', first))
      png = plot_meta_tasks(args.results / 'meta_tasks.png', stages)
      print(f'plot: {png}', flush=True)
      learned = weights.load_disco_103(params_path)
      args.rule_sha256 = weights.sha256_of(params_path)
      meta_summary = json.loads((out / 'meta' / 'summary.json').read_text())
      (args.results / 'meta_summary.json').write_text(
        json.dumps(meta_summary, indent=1) + '\n'
      )
    rates = (
      tune(out, args, suite, settings, learned)
      if args.tune_rates is not None
      else None
    )
    if args.tune_only:
      print((args.results / 'tuning.md').read_text())
      return 0
    rows = evaluate(out, args, held_out, settings, learned, rates)
  except comparison.Interrupted as e:
    print(f'stopped: {e}', file=sys.stderr)
    return 130
  except FileNotFoundError as e:  # --report without a run's files.
    print(f'error: {e}', file=sys.stderr)
    return 2

  command = 'python scripts/benchmark_meta_suite.py ' + ' '.join(
    shlex.quote(a) for a in argv
  )
  command_file = args.results / 'command.txt'
  if not args.report:
    command_file.write_text(command + '\n')
  elif command_file.is_file():  # The command that trained the runs.
    command = command_file.read_text().strip()
  write_tables(
    args.results,
    rows,
    command,
    meta,
    settings,
    args.eval_settings,
    meta_summary,
    args.meta_init,
    args.learned,
    rates,
  )
  print((args.results / 'results.md').read_text())
  return 0


def task_rewards(meta_dir: pathlib.Path) -> dict[str, tuple]:
  """{task: (meta-steps [S], mean reward per step of its agents' training
  rollouts [S])} of a meta-training run's metrics.csv."""
  from disco_rl import metrics as metrics_lib  # pylint: disable=g-import-not-at-top

  settings = json.loads((meta_dir / run_files.SETTINGS).read_text())
  metrics = metrics_lib.read_metrics(meta_dir / 'metrics.csv')
  names = settings['settings'].get('tasks') or ['catch']
  columns = (
    [f'rewards_task{g}' for g in range(len(names))]
    if len(names) > 1
    else ['rewards']
  )
  return {
    name: (metrics['step'], metrics[column])
    for name, column in zip(names, columns, strict=False)
  }


def plot_meta_tasks(path: pathlib.Path, stages) -> pathlib.Path:
  """Each task's reward per step against meta-steps, the stages one after
  another (a dashed line where one starts), 20-step moving means.

  Args:
    path: the PNG to write.
    stages: [(label, meta-training run directory)], in order.
  """
  from disco_rl import plots  # pylint: disable=g-import-not-at-top

  fig, ax = plots.new_figure()
  colours, offset = {}, 0  # Tasks, not rules: `plots.other_colour`.
  for i, (label, meta_dir) in enumerate(stages):
    if i:
      ax.axvline(offset, color='gray', linestyle='--', linewidth=1)
      ax.text(
        offset,
        1.0,
        f' {label}',
        transform=ax.get_xaxis_transform(),
        va='top',
        fontsize=8,
        color='gray',
      )
    last = offset
    for task, (steps, rewards) in task_rewards(meta_dir).items():
      labelled = task in colours
      colours.setdefault(task, plots.other_colour(len(colours)))
      ax.plot(
        offset + steps,
        plots.smoothed(rewards, 20),
        color=colours[task],
        label=None if labelled else task,
      )
      last = max(last, offset + steps[-1] + 1)
    offset = last
  return plots.save_figure(
    fig,
    ax,
    path,
    'meta-step',
    'reward per step (training rollouts)',
    "meta-training: each task's agents (20-step means)",
    dpi=120,
  )


def evaluate(
  out: pathlib.Path, args, held_out, settings: dict, learned, rates=None
) -> list[dict]:
  """Trains (or reads back) every held-out environment x rule program in
  each evaluation setting, keeps its compact curves and final returns in
  `args.results` (`save_run`), and plots the curves from there; the
  table's rows. With `args.report`, trains nothing: all from
  `args.results`.

  `rates`: {(setting, rule): learning rate} chosen on the suite (`tune`);
  None: every rule at its setting's rate.

  Raises:
    comparison.Interrupted: a program stopped by a signal.
  """
  rows, panels = [], {}
  randoms = random_returns(args.results, held_out)
  for setting in args.eval_settings:
    for env_task in held_out:
      curves = panels[f'{setting} setting', env_task] = {}
      for rule in args.rules:
        rel = pathlib.Path(f'eval_{setting}') / env_dir_name(env_task) / rule
        config = eval_config(env_task, rule, args.seeds, settings[setting])
        if rates is not None:
          config = dataclasses.replace(
            config, learning_rate=rates[setting, rule]
          )
          rel = rel / rate_dir_name(config.learning_rate)
        if not (
          args.report
          or (
            not args.overwrite
            and is_saved(args.results / rel, config, rule_sha256(args, rule))
          )
        ):
          finals = run_finals(
            out / rel,
            config,
            args,
            learned,
            rule,
            args.seeds,
            f'[{setting}] {env_task}',
          )
          save_run(
            args.results / rel,
            out / rel,
            config,
            finals,
            rule_sha256(args, rule),
          )
        finals, runs = read_run(args.results / rel, args.seeds)
        curves[rule] = [runs[s] for s in args.seeds]
        mean, half = comparison.mean_ci(finals)
        rows.append(
          dict(
            setting=setting,
            env=env_task,
            rule=rule,
            learning_rate=config.learning_rate,
            seeds=len(finals),
            final_return_mean=mean,
            final_return_ci95=half,
            final_returns=finals,
          )
        )
      png = comparison.plot_rules(
        args.results / f'curves_{setting}_{env_dir_name(env_task)}.png',
        f'held-out {env_task} ({setting} setting)\nmean and 95% '
        'bootstrap band over seeds',
        curves,
        random=randoms[env_task],
      )
      print(f'plot: {png}', flush=True)
  png = comparison.plot_rules_grid(
    args.results / 'curves.png',
    'held-out environments: mean return and 95% bootstrap band over seeds',
    panels,
    randoms=randoms,
  )
  print(f'plot: {png}', flush=True)
  return rows


def save_run(
  results: pathlib.Path,
  path: pathlib.Path,
  config,
  finals: list[float],
  rule_sha: str = '',
) -> None:
  """The small files of the run in `path` that a report needs, into
  `results`: curves.csv (per seed, `comparison.CURVE_POINTS` means over
  iterations), finals.json (each seed's final return) and run.json (its
  settings and `rule_sha`, the learned rule's sha256: `is_saved` reads
  them)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  from disco_rl import metrics as metrics_lib  # pylint: disable=g-import-not-at-top

  results.mkdir(parents=True, exist_ok=True)
  metrics = metrics_lib.read_metrics(path / 'metrics.csv')
  pd.DataFrame(
    comparison.compact_curves(
      metrics, max(1, config.num_steps // comparison.CURVE_POINTS)
    )
  ).to_csv(results / 'curves.csv', index=False, float_format='%.6g')
  seeds = range(config.seed, config.seed + config.num_seeds)
  (results / 'finals.json').write_text(
    json.dumps(dict(zip(map(str, seeds), finals, strict=False)), indent=1)
    + '\n'
  )
  record = json.loads((path / run_files.SETTINGS).read_text())
  (results / run_files.SETTINGS).write_text(
    json.dumps(dict(record, rule_sha256=rule_sha), indent=2) + '\n'
  )


def is_saved(results: pathlib.Path, config, rule_sha: str = '') -> bool:
  """Whether `results` holds the saved files (`save_run`) of a finished
  run of `config` (and of the rule whose sha256 is `rule_sha`), so that a
  new machine continues from the committed results without training the
  run again."""
  record = results / run_files.SETTINGS
  if not (record.is_file() and (results / 'finals.json').is_file()):
    return False
  saved = json.loads(record.read_text())
  return (
    saved['settings'] == json.loads(json.dumps(dataclasses.asdict(config)))
    and saved.get('rule_sha256', '') == rule_sha
  )


def read_run(results: pathlib.Path, seeds) -> tuple[list[float], dict]:
  """(final returns of `seeds`, {seed: compact curve}) that `save_run`
  kept in `results`.

  Raises:
    FileNotFoundError: naming the run that has no files there.
  """
  if not (results / 'finals.json').is_file():
    raise FileNotFoundError(
      f'{results}: no finals.json (the run has not '
      'finished, or was made without --results here)'
    )
  finals = json.loads((results / 'finals.json').read_text())
  return [finals[str(s)] for s in seeds], comparison.read_curves(results)


def write_tables(
  out,
  rows,
  command,
  meta,
  settings,
  used,
  meta_summary,
  meta_init=None,
  learned=None,
  rates=None,
) -> None:
  """results.csv and results.md (`meta_summary` None: no rule was
  meta-trained here: the baselines only, or the rule of `learned`)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  pd.DataFrame(rows).to_csv(out / 'results.csv', index=False)
  changed = {
    f.name: getattr(meta, f.name)
    for f in dataclasses.fields(meta)
    if getattr(meta, f.name) != getattr(config_lib.MetaTrainConfig(), f.name)
    and f.name != 'tasks'
  }
  origin = (
    f'from the rule in {meta_init} (itself meta-trained from random parameters)'
    if meta_init
    else 'from random parameters'
  )
  rules = ' and '.join(dict.fromkeys(RULE_LABELS[r['rule']] for r in rows))
  what = (
    f'Fresh agents trained with {rules} (the learned rule: {learned}, '
    'meta-trained before) on held-out environments'
    if learned
    else f'Fresh agents trained with {rules} (no rule meta-trained in this '
    'run) on held-out environments'
    if meta_summary is None
    else f'Rule meta-trained {origin} for {meta.num_steps} '
    f'meta-steps on {", ".join(meta.tasks)} (final positive rewards '
    f'per meta-step {meta_summary["final_pos_rewards"]:.1f}, first '
    f'{meta_summary["first_pos_rewards"]:.1f}), then fresh agents '
    'trained with it on held-out environments'
  )
  lines = [
    f'{what}; final return = mean episode return over the last '
    f'{FINAL_FRACTION:.0%} of environment steps; the mean over seeds and '
    'their range (min to max): with so few seeds, a t interval would '
    'claim more (and can run past the returns possible).',
    '',
    '| setting | held-out env | rule | seeds | final return | per seed |',
    '|---|---|---|---|---|---|',
  ]
  for r in rows:
    seeds = ', '.join(f'{x:.2f}' for x in r['final_returns'])
    lines.append(
      f'| {r["setting"]} | {r["env"]} | {RULE_LABELS[r["rule"]]} | '
      f'{r["seeds"]} | {comparison.mean_range(r["final_returns"])} | '
      f'{seeds} |'
    )
  if meta_init and changed.get('init') == 'disco_103':
    # init='disco_103' only says the starting parameters come in the
    # disco_103.npz layout: here they are --meta-init's, not Disco103's.
    changed['init'] = f'{meta_init} (disco_103 layout; not Disco103)'
  lines.append('')
  if learned is None:
    lines.append(
      f'Meta-training settings (MetaTrainConfig fields other '
      f'than their defaults): `{changed}`'
    )
  elif 'meta' in used:  # Nothing meta-trained: they define that setting.
    lines.append(
      f"The meta setting's source (MetaTrainConfig fields other "
      f'than their defaults; nothing meta-trained in this run): '
      f'`{changed}`'
    )
  for name in used:
    lines.append(
      f'Evaluation setting {name!r} (every environment and '
      f'rule): `{settings[name]}`'
    )
  if rates is not None:
    lines.append(
      'Learning rates chosen on the suite (tuning.md; they '
      "replace the settings' learning_rate): "
      + ', '.join(
        f'{s} {RULE_LABELS[r]} {v:g}' for (s, r), v in sorted(rates.items())
      )
    )
  lines += ['', f'Command: `{command}`', '']
  (out / 'results.md').write_text('\n'.join(lines))


if __name__ == '__main__':
  sys.exit(main())
