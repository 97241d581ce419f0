#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a meta-step costs, over a grid of meta-training settings.

Each point of the grid is a `MetaTrainConfig`: a preset of the meta_train
command (`--preset`, default the notebook's), changed by `--set` and by one
value of each `--vary` axis (every combination, the last axis fastest).
Each point runs `--steps` meta-steps in a fresh process (so that its peak
memory is its own) through the package's loop (`make_meta_train`, then
`runtime.host_loop.run`, whose `Timing` keeps the first call, which compiles,
apart from the rest), one meta-step per call, and the script prints one row per
point, side by side: seconds per meta-step, meta-steps and agent updates (K per
meta-step) per second after compiling, the compile time (with the first call),
the process's peak resident memory and its ratio to the first row's, and the
hours `--target-steps` meta-steps would take.

  # The meta-gradient's window: K agent updates per meta-step, with and
  # without rematerialisation (`make bench-meta-window`):
  python scripts/benchmark_meta_steps.py --vary num_inner_steps 2 5 20 \\
      --vary remat false true
  # Rule sizes x populations, tabular agents on LPG's gridworlds:
  python scripts/benchmark_meta_steps.py --preset lpg \\
      --vary rule_sizes disco_103 lpg small tiny --vary num_agents 8 32 128
  python scripts/benchmark_meta_steps.py --tiny   # a smoke run (a minute)

Names are `MetaTrainConfig` fields, and `num_bins`: the bins of the agents'
categorical q (Disco103's 601), a setting of the rule's agents rather than
of the job (see `BinsConfig`). Values are read as a `NAME[key=value]`
setting is (numbers, true/false, text); a tuple-valued field takes a
number or NxM; `rule_sizes` takes a name of `disco.NAMED_SIZES` or
key=value,... of `disco.MetaNetSizes` fields (e.g.
'prediction_size=8,hidden_size=64').
"""

import argparse
import dataclasses
import itertools
import json
import re
import subprocess
import sys
from typing import Any

import jax
import numpy as np

from disco_rl import agent as agent_lib
from disco_rl import environments
from disco_rl.cli import meta_train as command
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import job as meta
from disco_rl.runtime import host_loop
from disco_rl.runtime import metrics
from disco_rl.update_rules import disco

# The smoke run's settings (--tiny): small networks and batches, one point.
TINY = dict(
  num_agents=2,
  batch_size_per_device=4,
  rollout_len=4,
  num_inner_steps=2,
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
  value_dense=(8,),
)


@dataclasses.dataclass(frozen=True)
class BinsConfig(meta_config.MetaTrainConfig):
  """A `MetaTrainConfig` whose agents' categorical q has `num_bins` bins:
  a setting of the rule's agents (Disco103's 601), not of the job, but
  most of a tiny tabular agent (observation x actions x bins), so part of
  what a meta-step costs at LPG's scale."""

  num_bins: int = 601

  def agent_settings(self, rule, net=None, precision='float32'):
    settings = super().agent_settings(rule, net, precision)
    settings.update_rule.num_bins = self.num_bins
    return settings


def parse_value(name: str, text: str) -> Any:
  """One setting's value from its text, as `BinsConfig(name=...)` takes it;
  SystemExit for an unknown name or sizes that are not `MetaNetSizes`."""
  fields = {f.name: f for f in dataclasses.fields(BinsConfig)}
  if name not in fields:
    raise SystemExit(
      f'error: unknown setting {name!r}; expected one of {sorted(fields)}'
    )
  if name == 'rule_sizes':
    if text in disco.NAMED_SIZES:
      return disco.NAMED_SIZES[text].changes()
    try:
      return disco.as_sizes(environments.parse_kwargs(text)).changes()
    except ValueError as e:
      raise SystemExit(f'error: rule_sizes {text!r}: {e}') from None
  if isinstance(fields[name].default, tuple):
    parts = text.split('x') if re.fullmatch(r'[\d.x]+', text) else [text]
    return tuple(environments.parse_value(p) for p in parts)
  return environments.parse_value(text)


def grid(args) -> list[dict[str, Any]]:
  """The points: the settings each run changes from the preset."""
  base = dict(num_devices=1, debug_checks=False, seed=0, steps_per_call=1)
  base['num_steps'] = args.steps
  if args.tiny:
    base.update(TINY)
  for text in args.set:
    name, _, value = text.partition('=')
    base[name] = parse_value(name, value)
  axes = [
    [(name, parse_value(name, v)) for v in values]
    for name, *values in args.vary
  ]
  return [dict(base, **dict(point)) for point in itertools.product(*axes)]


def child(settings: dict[str, Any]) -> dict[str, float]:
  """In a fresh process: runs the point through `runtime.host_loop.run`; returns
  compile_s (the first call) and s_per_step (the others), peak_mb."""
  # JSON's lists back to the tuples the config holds.
  settings = {
    k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()
  }
  if 'rule_sizes' in settings:
    settings['rule_sizes'] = disco.as_sizes(settings['rule_sizes']).changes()
  job = meta.make_meta_train(BinsConfig(**settings))
  timing = host_loop.run(
    job, job.init(), settings['num_steps'], [], progress=False
  ).timing
  return dict(
    compile_s=timing.first_call_s,
    s_per_step=timing.steady_s / timing.steady_steps,
    peak_mb=metrics.peak_memory_mb(),
  )


def measure(settings: dict[str, Any]) -> dict[str, float]:
  """`child(settings)` in a fresh process."""
  proc = subprocess.run(
    [sys.executable, __file__, '--child', json.dumps(settings)],
    capture_output=True,
    text=True,
    check=False,
  )
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
  if proc.returncode or not lines:
    raise SystemExit(f'error: {settings} failed:\n{proc.stderr[-3000:]}')
  return json.loads(lines[-1][len('RESULT ') :])


def rule_parameters(sizes: dict[str, Any] | None) -> int:
  """The meta-network's parameters at `sizes` (traced, not built)."""
  rule = disco.DiscoUpdateRule(
    **agent_lib.get_settings_disco(sizes).update_rule
  )
  params = jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))[0]
  return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))


def table(rows: list[dict[str, Any]], varied: list[str], target: int) -> str:
  """The rows as a markdown table, the varied settings first."""
  first = rows[0]['peak_mb']
  head = [
    *varied,
    'inner updates',
    'rule parameters',
    's per meta-step',
    'meta-steps/s',
    'agent updates/s',
    'compile (s)',
    'peak MB',
    'memory vs first',
    f'hours for {target:,}',
  ]
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for r in rows:
    cells = [
      *(_text(r['settings'][name], name) for name in varied),
      'unrolled' if r['unrolled'] else 'loop',
      f'{r["params"]:,}',
      f'{r["s_per_step"]:.3f}',
      f'{1 / r["s_per_step"]:.3f}',
      f'{r["inner_steps"] / r["s_per_step"]:.2f}',
      f'{r["compile_s"]:.0f}',
      f'{r["peak_mb"]:.0f}',
      f'{r["peak_mb"] / first:.2f}x',
      f'{r["s_per_step"] * target / 3600:.1f}',
    ]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def _text(value: Any, name: str) -> str:
  if name == 'rule_sizes':
    sizes = disco.as_sizes(value)
    names = [n for n, s in disco.NAMED_SIZES.items() if s == sizes]
    return names[0] if names else sizes.text()
  return str(value)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
    epilog=__doc__.split('\n\n', 1)[1],
  )
  parser.add_argument('--child', help=argparse.SUPPRESS)
  parser.add_argument(
    '--preset', default='notebook', choices=sorted(command.PRESETS)
  )
  parser.add_argument(
    '--set',
    action='append',
    default=[],
    metavar='NAME=VALUE',
    help='a setting of every point (repeatable)',
  )
  parser.add_argument(
    '--vary',
    action='append',
    nargs='+',
    default=[],
    metavar=('NAME', 'VALUE'),
    help='an axis of the grid: a setting and its values (repeatable)',
  )
  parser.add_argument(
    '--steps',
    type=int,
    default=6,
    help='meta-steps per point (the first one compiles; at least 2)',
  )
  parser.add_argument('--target-steps', type=int, default=20000)
  parser.add_argument('--json', help='also write the rows to this file')
  parser.add_argument(
    '--tiny', action='store_true', help='tiny networks and batches'
  )
  args = parser.parse_args(argv)
  if args.child:
    print('RESULT ' + json.dumps(child(json.loads(args.child))))
    return 0
  if args.steps < 2:
    parser.error(f'--steps must be >= 2, got {args.steps}')
  points = grid(args)
  varied = [name for name, *_ in args.vary]
  rows = []
  for changes in points:
    settings = {**command.PRESETS[args.preset], **changes}
    config = BinsConfig(**settings)  # Checked before the process starts.
    result = measure(settings)
    rows.append(
      dict(
        settings=changes,
        params=rule_parameters(settings.get('rule_sizes')),
        inner_steps=config.num_inner_steps,
        unrolled=config.num_inner_steps <= config.max_unrolled_inner_steps,
        **result,
      )
    )
    print(
      ', '.join(f'{n}={_text(changes[n], n)}' for n in varied) + ': '
      f'{result["s_per_step"]:.3f} s/meta-step, compile '
      f'{result["compile_s"]:.0f} s, peak {result["peak_mb"]:.0f} MB',
      flush=True,
    )
  print(
    f'\npreset {args.preset}; {args.steps} meta-steps per point, the first '
    'compiling; one device\n'
  )
  print(table(rows, varied, args.target_steps))
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(dict(preset=args.preset, rows=rows), f, indent=1, default=list)
  return 0


if __name__ == '__main__':
  sys.exit(main())
