#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-step cost for a grid of rule sizes x agent counts (issue 54).

For each rule size (`disco.MetaNetSizes`: Disco103's, LPG's prediction
size, smaller LSTMs) and each population size, meta-trains a few steps of
the meta-training job (`loops.meta.make_meta_train`) in a fresh process,
with tiny tabular agents on an LPG gridworld (each agent in its own layout,
`layout_seed=-1`), and prints side by side: seconds per meta-step after
compilation, the compile time (the first call), and the hours 20,000
meta-steps would take.

The sizes are the runs' `MetaTrainConfig.rule_sizes`; `--num-bins`, the
value bins of the agents' categorical q, is not a config field (see
`BinsConfig`).

  python scripts/benchmark_rule_sizes.py --sizes disco_103 lpg small tiny \
      --agents 8 32 128 --steps 6
  python scripts/benchmark_rule_sizes.py --tiny   # one tiny run (a minute)

Sizes are names of `SIZES` or NAME:key=value,... of `MetaNetSizes` fields,
e.g. 'mine:prediction_size=8,hidden_size=64,meta_hidden_size=32'.
"""

import argparse
import dataclasses
import json
import resource
import subprocess
import sys
import time
from typing import Any

import jax
import numpy as np

from disco_rl import agent as agent_lib
from disco_rl import environments
from disco_rl.loops import config as config_lib
from disco_rl.loops import meta
from disco_rl.update_rules import disco

# Named rule sizes, as `rule_sizes` settings (their changes from Disco103's).
SIZES = {name: sizes.changes() for name, sizes in disco.NAMED_SIZES.items()}
# The gridworld suite's task: GROOVE's 'all' distribution, a layout per
# agent, tabular agents.
TASK = 'lpg:all[layout_seed=-1,net=table]'


@dataclasses.dataclass(frozen=True)
class BinsConfig(config_lib.MetaTrainConfig):
  """A `MetaTrainConfig` whose agents' categorical q has `num_bins` bins.

  The bins are part of the disco rule's settings (Disco103's 601,
  `agent.get_settings_disco`), not of `MetaTrainConfig`: the meta-network's
  parameters do not depend on them. They stay a knob of this script alone
  because the q head (observation x actions x bins) is most of a tiny
  tabular agent, so they are part of what a meta-step costs at LPG's scale;
  a field would follow if a run chose other bins.
  """

  num_bins: int = 601

  def agent_settings(self, rule, net=None, precision='float32'):
    settings = super().agent_settings(rule, net, precision)
    settings.update_rule.num_bins = self.num_bins
    return settings


def parse_size(text: str) -> tuple[str, dict[str, Any]]:
  """'lpg' -> ('lpg', SIZES['lpg']); 'mine:hidden_size=64' -> ('mine',
  {...}), tuples written as `--rule-sizes` writes them (embedding_size=8x1)."""
  if text in SIZES:
    return text, dict(SIZES[text])
  name, sep, rest = text.partition(':')
  if not sep:
    raise SystemExit(
      f'Unknown size {text!r}; expected one of {list(SIZES)} '
      'or NAME:key=value,...'
    )
  # Checked here, before any process starts.
  return name, disco.as_sizes(environments.parse_kwargs(rest)).changes()


def parameter_count(sizes: dict[str, Any]) -> int:
  """The meta-network's parameters at `sizes` (traced, not built)."""
  rule = disco.DiscoUpdateRule(
    **agent_lib.get_settings_disco(sizes).update_rule
  )
  params = jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))[0]
  return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))


def child(settings: dict[str, Any]) -> dict[str, float]:
  """Runs in a fresh process: compile (the first meta-step), then time the
  rest. Returns compile_s, s_per_step, peak_mb."""
  settings = dict(settings)
  settings['rule_sizes'] = {
    k: tuple(v) if isinstance(v, list) else v
    for k, v in settings['rule_sizes'].items()
  }
  settings['tasks'] = tuple(settings['tasks'])
  for key in ('dense', 'model_head_hiddens', 'value_dense'):
    settings[key] = tuple(settings[key])
  config = BinsConfig(**settings)
  job = meta.make_meta_train(config)
  state = job.init()
  start = time.perf_counter()
  state, _ = job.step(state, 1)
  compile_s = time.perf_counter() - start
  steps = config.num_steps - 1
  start = time.perf_counter()
  done = 0
  while done < steps:
    count = min(config.steps_per_call, steps - done)
    state, _ = job.step(state, count)
    done += count
  jax.block_until_ready(state)
  elapsed = time.perf_counter() - start
  return dict(
    compile_s=compile_s,
    s_per_step=elapsed / max(steps, 1),
    peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
  )


def measure(settings: dict[str, Any]) -> dict[str, float]:
  proc = subprocess.run(
    [sys.executable, __file__, '--child', json.dumps(settings)],
    capture_output=True,
    text=True,
    check=False,
  )
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
  if proc.returncode or not lines:
    raise SystemExit(f'{settings} failed:\n{proc.stderr[-3000:]}')
  return json.loads(lines[-1][len('RESULT ') :])


def print_tables(
  rows: list[dict[str, Any]], agents: list[int], target_steps: int
) -> None:
  """One row per size, one column per agent count, for each measure."""
  sizes = list(dict.fromkeys(r['size'] for r in rows))
  cell = {(r['size'], r['agents']): r for r in rows}
  head = ' | '.join(f'{n} agents' for n in agents)
  rule = '|'.join(['---'] * (len(agents) + 2))
  for title, fmt in (
    (
      'seconds per meta-step (after compiling)',
      lambda r: f'{r["s_per_step"]:.3f}',
    ),
    (
      'compile seconds (the first meta-step)',
      lambda r: f'{r["compile_s"]:.0f}',
    ),
    (
      f'hours for {target_steps:,} meta-steps',
      lambda r: f'{r["s_per_step"] * target_steps / 3600:.1f}',
    ),
  ):
    print(f'\n{title}\n\n| size | rule parameters | {head} |\n|{rule}|')
    for size in sizes:
      values = [
        fmt(cell[size, n]) if (size, n) in cell else '-' for n in agents
      ]
      params = next(r['params'] for r in rows if r['size'] == size)
      print(f'| {size} | {params:,} | ' + ' | '.join(values) + ' |')


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--child', help=argparse.SUPPRESS)
  parser.add_argument(
    '--sizes', nargs='+', default=['disco_103', 'lpg', 'small', 'tiny']
  )
  parser.add_argument('--agents', type=int, nargs='+', default=[8, 32, 128])
  parser.add_argument('--task', default=TASK)
  parser.add_argument(
    '--steps',
    type=int,
    default=6,
    help='meta-steps per run (the first one compiles)',
  )
  parser.add_argument(
    '--envs', type=int, default=64, help='environments per agent (GROOVE: 64)'
  )
  parser.add_argument('--rollout-len', type=int, default=20)
  parser.add_argument(
    '--inner-steps',
    type=int,
    default=5,
    help='agent updates per meta-step (GROOVE: K=5)',
  )
  parser.add_argument(
    '--num-bins',
    type=int,
    default=601,
    help="bins of the agents' categorical q (Disco103: 601)",
  )
  parser.add_argument(
    '--population', default='auto', choices=('auto', 'map', 'vmap')
  )
  parser.add_argument('--target-steps', type=int, default=20000)
  parser.add_argument('--json', help='also write the rows to this file')
  parser.add_argument(
    '--tiny',
    action='store_true',
    help='one run: the tiny size, 2 agents, tiny batches',
  )
  args = parser.parse_args()
  if args.child:
    print('RESULT ' + json.dumps(child(json.loads(args.child))))
    return 0
  if args.tiny:
    args.sizes, args.agents, args.steps = ['tiny'], [2], 3
    args.envs, args.rollout_len, args.inner_steps = 4, 4, 2
  base = dict(
    num_steps=args.steps,
    steps_per_call=max(1, args.steps - 1),
    num_devices=1,
    debug_checks=False,
    seed=0,
    init='random',
    tasks=[args.task],
    batch_size_per_device=args.envs,
    rollout_len=args.rollout_len,
    num_inner_steps=args.inner_steps,
    population=args.population,
    num_bins=args.num_bins,
    # Tiny agents (the task's net: a table by default), the lpg preset's.
    net='tabular',
    dense=(8,),
    model_lstm_size=8,
    model_head_hiddens=(8,),
    value_dense=(16,),
  )
  rows = []
  for text in args.sizes:
    name, sizes = parse_size(text)
    params = parameter_count(sizes)
    for agents in args.agents:
      settings = dict(base, num_agents=agents, rule_sizes=sizes)
      result = measure(settings)
      rows.append(
        dict(size=name, sizes=sizes, params=params, agents=agents, **result)
      )
      print(
        f'{name:>10} ({params:,} parameters), {agents} agents: '
        f'{result["s_per_step"]:.3f} s/meta-step, compile '
        f'{result["compile_s"]:.0f} s, peak {result["peak_mb"]:.0f} MB',
        flush=True,
      )
  print(
    f'\ntask {args.task}; {args.envs} environments x {args.rollout_len} '
    f'steps per agent update, {args.inner_steps} updates per meta-step, '
    f'{args.num_bins} value bins, population {args.population}, '
    f'{args.steps} meta-steps per run'
  )
  print_tables(rows, args.agents, args.target_steps)
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(dict(settings=base, rows=rows), f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main())
