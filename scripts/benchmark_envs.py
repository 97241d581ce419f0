#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Training speed on each environment family, side by side in one run.

For each family (Atari through envpool on the host, Sokoban and Craftax
pixels compiled into the fused loop, MinAtar Breakout for reference),
Disco103 trains `--steps` learner steps with the residual torso (IMPALA's
sizes: 16,32,32 channels, 2 blocks; MinAtar: the conv torso) at batch 4,
replay ratio 2 (2 environments), rollouts of 29 steps, buffer 32: small,
for a 2-core CPU, where one learner step on 32 Atari trajectories took
minutes. Prints
and writes (to --out: results.json, results.md) the learner steps/s after
compilation, the environment steps/s (learner steps/s x 2 x 29: each
learner step acts one rollout of every environment), the compile time and
the replay bytes per trajectory.

And Atari acting alone, two ways (the issue asked to measure both): the
host stepping the adapter uses (envpool's synchronous `step` from Python),
and envpool's XLA interface (`env.xla()`, stepped inside `jax.jit` by
`lax.scan`), each with random actions, in a child process (the XLA
interface has crashed at exit here, so its process is kept apart).

  python scripts/benchmark_envs.py --out runs/bench_envs
  python scripts/benchmark_envs.py --tiny --out /tmp/e
"""

import argparse
import json
import pathlib
import subprocess
import sys
import textwrap
import time

FAMILIES = {
  'Atari (envpool, host loop)': dict(env='envpool:Breakout-v5', net='resnet'),
  'Sokoban (Jumanji, toy levels)': dict(
    env='jumanji:Sokoban-v0', env_kwargs=dict(generator='toy'), net='resnet'
  ),
  'Craftax-Classic pixels': dict(
    env='craftax:Craftax-Classic-Pixels-v1', net='resnet'
  ),
  'MinAtar Breakout (reference)': dict(
    env='gymnax:Breakout-MinAtar', net='conv', conv_channels=(16,)
  ),
}
SETTINGS = dict(
  batch_size=4,
  replay_ratio=2,
  buffer_capacity=32,
  rollout_len=29,
  dense=(256,),
  model_lstm_size=128,
  model_head_hiddens=(128,),
  resnet_channels=(16, 32, 32),
  resnet_blocks=2,
  learning_rate=1e-3,
  debug_checks=False,
)
TINY = dict(
  SETTINGS,
  batch_size=4,
  replay_ratio=2,
  buffer_capacity=8,
  rollout_len=4,
  dense=(8,),
  model_lstm_size=4,
  model_head_hiddens=(4,),
  resnet_channels=(4,),
  resnet_blocks=1,
)
ACTING_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import envpool
    mode, num_envs, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pool = envpool.make('Breakout-v5', env_type='gymnasium',
                        num_envs=num_envs, batch_size=num_envs, seed=0,
                        **json.loads(sys.argv[4]))
    pool.reset()
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 18, (steps, num_envs)).astype(np.int32)
    if mode == 'host':
      start = time.perf_counter()
      for a in actions:
        pool.step(a)
      seconds = time.perf_counter() - start
    else:
      import jax
      handle, _, _, step = pool.xla()
      @jax.jit
      def run(handle, actions):
        def body(h, a):
          h, (obs, rew, term, trunc, info) = step(h, a)
          return h, rew.sum()
        return jax.lax.scan(body, handle, actions)
      handle, out = run(handle, actions[:2])
      jax.block_until_ready(out)
      start = time.perf_counter()
      handle, out = run(handle, actions)
      jax.block_until_ready(out)
      seconds = time.perf_counter() - start
    print(json.dumps(dict(env_steps_per_second=steps * num_envs / seconds)),
          flush=True)
""")


class Interrupted(Exception):
  """A run stopped by a signal before its end: the script stops too (exit
  status 130, one `stopped:` line)."""


def train(family: str, settings: dict, steps: int, out: pathlib.Path):
  """Trains one family; its speed and sizes."""
  from disco_rl.jobs import config as config_lib  # pylint: disable=g-import-not-at-top
  from disco_rl.jobs import trainer  # pylint: disable=g-import-not-at-top

  config = config_lib.EvalConfig(
    num_steps=steps, steps_per_call=1, **settings, **FAMILIES[family]
  )
  run_dir = out / family.split(' ')[0].lower()
  summary = trainer.Trainer(
    config, run_dir, overwrite=True, progress=False
  ).fit()
  if summary.get('interrupted') or not summary.get('completed', True):
    raise Interrupted(f'{family} stopped ({summary.get("interrupted")}).')
  rate = summary['steps_per_second']
  return dict(
    family=family,
    env=config.env,
    net=config.net,
    learner_steps_per_second=rate,
    env_steps_per_second=rate * config.num_envs * config.rollout_len,
    compile_and_first_step_s=summary['compile_and_first_step_s'],
    replay_bytes_per_trajectory=summary['replay_bytes_per_trajectory'],
  )


def acting(mode: str, num_envs: int, steps: int) -> dict:
  """Atari acting alone, `mode` 'host' or 'xla', in a child process."""
  from disco_rl.environments import envpool_env  # pylint: disable=g-import-not-at-top

  child = subprocess.run(
    [
      sys.executable,
      '-c',
      ACTING_SCRIPT,
      mode,
      str(num_envs),
      str(steps),
      json.dumps(envpool_env.ATARI_DEFAULTS),
    ],
    capture_output=True,
    text=True,
    timeout=600,
    check=False,
  )
  lines = [ln for ln in child.stdout.splitlines() if ln.startswith('{')]
  result = dict(mode=mode, num_envs=num_envs, returncode=child.returncode)
  if lines:
    result.update(json.loads(lines[-1]))
  notes = [
    ln
    for ln in child.stderr.splitlines() + child.stdout.splitlines()
    if ln.strip() and not ln.startswith('{')
  ]
  if notes:
    result['output'] = ' | '.join(notes[-3:])[:300]
  return result


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--out', required=True, help='output directory')
  parser.add_argument(
    '--steps',
    type=int,
    default=None,
    help='learner steps per family (default 6; --tiny 3)',
  )
  parser.add_argument(
    '--families', nargs='+', default=list(FAMILIES), choices=list(FAMILIES)
  )
  parser.add_argument(
    '--tiny', action='store_true', help='tiny sizes: a smoke run'
  )
  args = parser.parse_args(argv)
  steps = args.steps or (3 if args.tiny else 6)
  if steps < 2:
    print(f'error: --steps must be >= 2, got {steps}.', file=sys.stderr)
    return 2
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  settings = TINY if args.tiny else SETTINGS
  rows = []
  for family in args.families:
    start = time.time()
    try:
      row = train(family, settings, steps, out)
    except Interrupted as e:
      print(f'stopped: {e}', file=sys.stderr)
      return 130
    rows.append(row)
    print(
      f'{family}: {row["learner_steps_per_second"]:.2f} learner steps/s,'
      f' {row["env_steps_per_second"]:.0f} env steps/s, compile '
      f'{row["compile_and_first_step_s"]:.0f} s ({time.time() - start:.0f}'
      ' s)',
      flush=True,
    )
  act_steps = 20 if args.tiny else 500
  acts = [acting(mode, 8, act_steps) for mode in ('host', 'xla')]
  for a in acts:
    print(
      f'Atari acting ({a["mode"]}, {a["num_envs"]} envs): '
      f'{a.get("env_steps_per_second", float("nan")):.0f} env steps/s, '
      f'exit {a["returncode"]}'
      + (f' ({a["output"]})' if 'output' in a else ''),
      flush=True,
    )
  command = 'python scripts/benchmark_envs.py ' + ' '.join(
    argv if argv is not None else sys.argv[1:]
  )
  (out / 'results.json').write_text(
    json.dumps(
      dict(
        command=command,
        steps=steps,
        settings=settings,
        training=rows,
        acting=acts,
      ),
      indent=1,
      default=list,
    )
    + '\n'
  )
  lines = [
    f'`{command}`: {steps} learner steps per family, batch '
    f'{settings["batch_size"]}, '
    f'{settings["batch_size"] // settings["replay_ratio"]}'
    f' environments, rollouts of {settings["rollout_len"]}.',
    '',
    '| family | env | net | learner steps/s | env steps/s | compile '
    '(s) | replay bytes / trajectory |',
    '|---|---|---|---|---|---|---|',
  ]
  for r in rows:
    lines.append(
      f'| {r["family"]} | `{r["env"]}` | {r["net"]} | '
      f'{r["learner_steps_per_second"]:.2f} | '
      f'{r["env_steps_per_second"]:.0f} | '
      f'{r["compile_and_first_step_s"]:.0f} | '
      f'{r["replay_bytes_per_trajectory"]:,} |'
    )
  lines += [
    '',
    '| Atari acting alone | envs | env steps/s | exit status |',
    '|---|---|---|---|',
  ]
  for a in acts:
    lines.append(
      f'| {a["mode"]} | {a["num_envs"]} | '
      f'{a.get("env_steps_per_second", float("nan")):.0f} | '
      f'{a["returncode"]} |'
    )
  (out / 'results.md').write_text('\n'.join(lines) + '\n')
  print('\n'.join(lines))
  return 0


if __name__ == '__main__':
  sys.exit(main())
