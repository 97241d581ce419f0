# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Trains an agent on any registered environment with a fixed update rule:
Disco103, a meta-trained rule (`--weights`) or actor-critic.

  disco-rl eval --steps 1000 --seed 0 --out runs/eval

`--env` names the environment (Catch, gymnax, Craftax, Jumanji, Atari
through envpool; docs/environments.md lists them), `--rule`
the rule (Disco103, actor-critic) and `--weights` a meta-trained rule's
parameters; without them, Disco103 on Catch 8x8 with the upstream eval
notebook's settings. Prints progress, then the final average return and the
paths of the metrics CSV and the learning-curve PNG. `--steps` counts
learner steps (the first iterations only fill the replay buffer); with
`--epochs` (on-policy, `--preset stoix`) it counts rollouts, each learned
from in epochs x minibatches updates. Every
setting of `EvalConfig` is a flag (`--help` lists them); `--resume DIR`
continues an interrupted run. Several processes: see docs/scaling.md
("Several hosts").
"""

import sys

from disco_rl.runtime import signals

signals.catch_from_here(__name__)  # The rule for signals, from this line on.

# pylint: disable=g-import-not-at-top,wrong-import-position
from disco_rl.cli import common
from disco_rl.jobs import config as config_lib


def _weights_unusable(config) -> str | None:
  if config.rule == 'disco_103':
    return None
  return (
    f'--weights is for the disco_103 rule; rule {config.rule!r} has no '
    'meta-parameters to load.'
  )


def _report(summary) -> None:
  final = summary['final_avg_return']
  per_run = summary['final_avg_return_per_run']
  text = lambda x: f'{x:.3f}' if x is not None else 'none'
  print(
    'final average return (last 100 steps): '
    + (
      text(final)
      if final is not None
      else 'none (no episode ended; run more steps)'
    )
  )
  if len(per_run) > 1:
    print(
      '  per run: '
      + '; '.join(f'{run}: {text(value)}' for run, value in per_run.items())
    )
  print(
    common.speed_line(
      'step',
      summary['steps_per_second'],
      summary['compile_and_first_step_s'],
      'compilation and the first call',
      digits=2,
    )
  )
  print(f'metrics: {summary["metrics_csv"]}')
  print(f'plot:    {summary["plot_png"]}')


# Named starting points (`--preset`); flags given override them, e.g.
# `EvalConfig(**PRESETS['stoix'], env='gymnax:Breakout-MinAtar')`.
PRESETS = {
  # The upstream eval notebook (the EvalConfig defaults): a replay buffer,
  # one learner update per step.
  'notebook': {},
  # Stoix's regime for Disco103 (issue 70): on-policy, rollouts of 128
  # steps, 4 epochs of 8 minibatches per rollout, Adam at 3e-4, no replay.
  # 32 environments is this project's choice for a small machine (each
  # update learns on 4 trajectories, 512 steps; Stoix runs far more).
  'stoix': dict(
    rollout_len=128,
    batch_size=32,
    replay_ratio=1,
    buffer_capacity=32,
    epochs=4,
    minibatches=8,
    learning_rate=3e-4,
  ),
}

# The command as `python -m` runs it (`disco-rl eval` passes its own).
PROG = 'python -m disco_rl.cli.eval'

# The command: main(argv=None, prog=None) -> exit status.
main = common.command(
  description=__doc__.split('\n\n')[0],
  config_cls=config_lib.EvalConfig,
  default_out='runs/eval',
  weights_help="the rule's parameters: disco_103.npz or a "
  'meta-trained update_rule_params.npz (default: Disco103, '
  'found by disco_rl.weights)',
  weights_unusable=_weights_unusable,
  report=_report,
  presets=PRESETS,
  prog=PROG,
)


if __name__ == '__main__':
  sys.exit(main())
