# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Fresh table agents' return under a meta-training run's checkpoints.

  python scripts/checkpoint_returns.py RUN --steps 500 1000 \\
      --env lpg:dense --csv docs/results/.../checkpoint_returns.csv
  python scripts/checkpoint_returns.py RUN --steps 500 1000 \\
      --env 'lpg:all[layout_seed=1]' 'lpg:all[layout_seed=2]' \\
      'lpg:all[layout_seed=3]' --csv ... --pick --baselines baselines.csv

For each meta-step of `--steps` and each environment of `--env`, exports
the run's rule at that checkpoint (`disco-rl export-rule`) and trains fresh
agents with it (`disco-rl eval --weights`), the way issue 69's quick check
does: table agents with an action model of 8, 16 environments x 20 steps,
one learner step per acted batch, SGD at 40, seeds 0-2, 500 updates (the
flags below change these). Appends one row per (meta-step, environment) to
CSV: the final return as the eval command reports it (episodes of the last
100 updates, seeds together), per seed, and the agents' policy entropy
over their last 100 updates. Rows already in CSV are not run again, so the
script resumes.

`--pick` then ranks the checkpoints by their mean normalised score over
the environments, (final - random play) / (actor-critic - random play),
the stated procedure for choosing a rule from a run: give it environments
the rule will not be tested on (issue 69 uses `lpg:all` layouts 1-3, never
the gates' gridworlds). The baselines are kept in `--baselines` (a CSV:
env, random, actor_critic), measured where missing: random play by
`disco_rl.studies.measure.random_play`, the actor-critic by the eval
command with the same agents at Adam 3e-2 (`--rule actor_critic`).
"""

import argparse
import json
import pathlib
import subprocess
import sys

import pandas as pd

COLUMNS = (
  'arm',
  'meta_step',
  'env',
  'final',
  'per_seed',
  'entropy_last100',
)


def eval_flags(args: argparse.Namespace) -> list[str]:
  """The eval command's flags for a quick check (all but the rule)."""
  return [
    '--net', 'table', '--model-lstm-size', '8', '--model-head-hiddens', '8',
    '--batch-size', '16', '--rollout-len', '20', '--replay-ratio', '1',
    '--buffer-capacity', '16', '--agent-optimizer', args.agent_optimizer,
    '--learning-rate', str(args.learning_rate),
    '--steps', str(args.updates), '--no-progress',
    '--seeds', *[str(s) for s in args.seeds],
  ]  # fmt: skip


def disco_rl() -> str:
  """The command beside this interpreter (a virtualenv's), else on PATH."""
  beside = pathlib.Path(sys.executable).with_name('disco-rl')
  return str(beside) if beside.exists() else 'disco-rl'


def run(command: list[str]) -> None:
  """Runs a disco-rl command (`command` without the program's name)."""
  command = [disco_rl(), *command]
  done = subprocess.run(command, capture_output=True, text=True)
  if done.returncode != 0:
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
    print(f'error: {" ".join(command[1:3])} failed: {tail}', file=sys.stderr)
    raise SystemExit(2)


def measure(
  run_dir: pathlib.Path,
  step: int,
  env: str,
  work: pathlib.Path,
  args: argparse.Namespace,
) -> dict[str, object]:
  """One row: the rule of `run_dir` at `step` trained fresh agents on
  `env`."""
  arm = run_dir.name
  rule = work / f'{arm}_{step}.npz'
  if not rule.exists():
    run([
      'export-rule', str(run_dir), '--step', str(step),
      '--out', str(rule),
    ])  # fmt: skip
  out = work / f'{arm}_{step}_{env.replace(":", "_")}'
  run([
    'eval', '--env', env, '--weights', str(rule), '--out',
    str(out), '--overwrite', *eval_flags(args),
  ])  # fmt: skip
  summary = json.loads((out / 'summary.json').read_text())
  metrics = pd.read_csv(out / 'metrics.csv')
  last = metrics[metrics['step'] >= metrics['step'].max() - 99]
  per_seed = summary['final_avg_return_per_run'].values()
  return dict(
    arm=arm,
    meta_step=step,
    env=env,
    final=round(summary['final_avg_return'], 4),
    per_seed=' '.join(f'{r:.4g}' for r in per_seed),
    entropy_last100=round(float(last['entropy'].mean()), 4),
  )


def pick(
  table: pd.DataFrame, arm: str, envs: list[str], baselines: pd.DataFrame
) -> pd.Series:
  """Mean normalised score per meta-step over `envs`, best first (only
  meta-steps measured on every one of them): (final - random) /
  (actor_critic - random), with `baselines` indexed by env."""
  rows = table[(table['arm'] == arm) & table['env'].isin(envs)]
  base = baselines.loc[rows['env']]
  score = (rows['final'].to_numpy() - base['random'].to_numpy()) / (
    base['actor_critic'].to_numpy() - base['random'].to_numpy()
  )
  rows = rows.assign(score=score)
  by_step = rows.groupby('meta_step')['score'].agg(['mean', 'count'])
  by_step = by_step[by_step['count'] == len(set(envs))]
  return by_step['mean'].sort_values(ascending=False)


def baseline_row(
  env: str, work: pathlib.Path, args: argparse.Namespace
) -> dict[str, object]:
  """Random play's and the actor-critic's final return on `env`."""
  from disco_rl import environments  # pylint: disable=g-import-not-at-top
  from disco_rl.studies import measure  # pylint: disable=g-import-not-at-top

  name, settings = environments.parse_spec(env)
  random = measure.random_play(name, settings or None)['mean_return']
  out = work / f'actor_critic_{env.replace(":", "_")}'
  args_ac = argparse.Namespace(**{
    **vars(args), 'agent_optimizer': 'adam', 'learning_rate': 3e-2,
  })  # fmt: skip
  run([
    'eval', '--env', env, '--rule', 'actor_critic', '--out', str(out),
    '--overwrite', *eval_flags(args_ac),
  ])  # fmt: skip
  summary = json.loads((out / 'summary.json').read_text())
  return dict(
    env=env,
    random=round(random, 4),
    actor_critic=round(summary['final_avg_return'], 4),
  )


def write(table: pd.DataFrame, path: pathlib.Path) -> None:
  """Writes `table` to `path` whole or not at all."""
  path.parent.mkdir(parents=True, exist_ok=True)
  partial = path.with_suffix('.csv.partial')
  table.to_csv(partial, index=False)
  partial.replace(path)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('run_dir', type=pathlib.Path)
  parser.add_argument('--steps', type=int, nargs='+', required=True)
  parser.add_argument('--env', nargs='+', default=['lpg:dense'])
  parser.add_argument('--csv', type=pathlib.Path, required=True)
  parser.add_argument('--work', type=pathlib.Path, default=None)
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  parser.add_argument('--updates', type=int, default=500)
  parser.add_argument('--agent-optimizer', default='sgd')
  parser.add_argument('--learning-rate', type=float, default=40.0)
  parser.add_argument('--pick', action='store_true')
  parser.add_argument('--baselines', type=pathlib.Path, default=None)
  args = parser.parse_args(argv)
  if args.pick and args.baselines is None:
    parser.error('--pick needs --baselines CSV (kept, measured if missing)')
  if not (args.run_dir / 'run.json').exists():
    parser.error(f'run_dir: no meta-training run in {args.run_dir}')
  # Beside the runs' folder (runs/f69 -> runs/f69_eval), not in it.
  runs = args.run_dir.resolve().parent
  work = args.work or runs.with_name(f'{runs.name}_eval')
  work.mkdir(parents=True, exist_ok=True)
  table = (
    pd.read_csv(args.csv)
    if args.csv.exists()
    else pd.DataFrame(columns=list(COLUMNS))
  )
  arm = args.run_dir.name
  for step in args.steps:
    for env in args.env:
      done = (table['arm'] == arm) & (table['meta_step'] == step)
      if (done & (table['env'] == env)).any():
        continue
      row = measure(args.run_dir, step, env, work, args)
      print(', '.join(f'{k} {v}' for k, v in row.items()), flush=True)
      table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
      write(table, args.csv)
  if args.pick:
    baselines = (
      pd.read_csv(args.baselines)
      if args.baselines.exists()
      else pd.DataFrame(columns=['env', 'random', 'actor_critic'])
    )
    for env in args.env:
      if not (baselines['env'] == env).any():
        row = baseline_row(env, work, args)
        print(', '.join(f'{k} {v}' for k, v in row.items()), flush=True)
        baselines = pd.concat(
          [baselines, pd.DataFrame([row])], ignore_index=True
        )
        write(baselines, args.baselines)
    ranking = pick(table, arm, args.env, baselines.set_index('env'))
    print(f'mean normalised score over {list(args.env)}, best first:')
    for step, mean in ranking.items():
      print(f'  meta-step {step}: {mean:.3f}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
