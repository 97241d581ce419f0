# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.studies.spec and .run, and the study command.

A two-stage study of two cells each (actor-critic on two small Catch
boards at two rates, then on a third at the rate chosen) runs through
`disco-rl study` as users run it: stopped by SIGINT and by SIGKILL and
continued, it gives the results rows of a study never
stopped; `--report` rebuilds byte-identical reports from its files alone;
a changed setting in an existing cell is refused with one `error:` line
(these two through the command's `main` in the test's process: they train
nothing, and a process's start-up would add 2-4 s to each).
The documented example (studies/catch_example.py) runs in the slow target.
"""

import dataclasses
import os
import pathlib
import shutil
import signal
import subprocess
import textwrap
import time

import pandas as pd
import pytest
import smoke_env
import tiny

from disco_rl.studies import report as report_lib
from disco_rl.studies import run as study_run
from disco_rl.studies import spec as spec_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
TIMEOUT_S = 600

# The tiny eval settings of the study's cells (its spec's `base`).
STUDY_BASE = tiny.source(
  tiny.eval_settings(rule=None, batch_size=8, buffer_capacity=16)
)
SPEC = textwrap.dedent("""
    from disco_rl.studies.spec import RatePick, Rule, Stage, Study

    STUDY = Study(
        name='tiny',
        base=BASE,
        rules=(Rule('actor_critic'),),
        stages=(
            Stage('tune', envs=('jittable_catch[rows=5,columns=5]',
                                'jittable_catch[rows=6,columns=4]'),
                  seeds=(0, 1), rates=(3e-3, 3e-2), num_steps=STEPS),
            Stage('compare', envs=('jittable_catch[rows=7,columns=5]',),
                  seeds=(0, 1), rates=RatePick('tune'), num_steps=STEPS),
        ),
        baseline='actor_critic')
""").replace('BASE', STUDY_BASE)


def _spec(tmp_path, steps=12, **replace) -> pathlib.Path:
  text = SPEC.replace('STEPS', str(steps))
  for old, new in replace.items():
    assert old in text, old
    text = text.replace(old, new)
  path = tmp_path / f'spec_{len(list(tmp_path.glob("spec_*")))}.py'
  path.write_text(text)
  return path


def spec_lib_load(path: pathlib.Path) -> spec_lib.Study:
  """The STUDY of a spec file, as the command loads it."""
  from disco_rl.cli import study as study_cli  # pylint: disable=g-import-not-at-top

  return study_cli.load_study(path)


def _command(spec, out, *flags):
  env = dict(
    os.environ,
    **smoke_env.fast_jax_env(num_devices=1),
    JAX_PLATFORMS='cpu',
    MPLBACKEND='Agg',
  )
  return [
    *smoke_env.disco_rl_command('study'),
    str(spec),
    '--out',
    str(out),
    '--no-progress',
    *flags,
  ], env


def _run(spec, out, *flags):
  command, env = _command(spec, out, *flags)
  return subprocess.run(
    command,
    env=env,
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
    check=False,
  )


def _in_process(call_main, spec, out, *flags):
  """The command's `main` in this process (`call_main`): for what trains
  nothing (the reports rebuilt, a refusal), without a process's start-up
  (2-4 s)."""
  from disco_rl.cli import study as study_cli  # pylint: disable=g-import-not-at-top

  return call_main(
    study_cli.main, str(spec), '--out', str(out), '--no-progress', *flags
  )


def _stopped(spec, out, sig, tmp_path) -> subprocess.CompletedProcess:
  """The study started, then `sig` once its first cell's results are
  written and its second cell has saved a checkpoint."""
  command, env = _command(spec, out)
  log = tmp_path / f'stopped_{sig.name}.log'
  with open(log, 'w') as stream:
    proc = subprocess.Popen(
      command, env=env, cwd=ROOT, stdout=stream, stderr=subprocess.STDOUT
    )
  second = out / 'runs/tune/jittable_catch_rows_6_columns_4/actor_critic'
  deadline = time.monotonic() + TIMEOUT_S
  try:
    while not (
      (out / 'results.csv').is_file()
      and (second / 'checkpoints').is_dir()
      and any(p.name.isdigit() for p in (second / 'checkpoints').iterdir())
    ):
      assert proc.poll() is None, log.read_text()[-3000:]
      assert time.monotonic() < deadline
      time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait(timeout=TIMEOUT_S)
  finally:
    if proc.poll() is None:
      proc.kill()
  return subprocess.CompletedProcess(
    command, proc.returncode, log.read_text(), ''
  )


def test_a_study_stops_resumes_and_reports_as_one_never_stopped(
  tmp_path, call_main
):
  spec = _spec(tmp_path)
  straight = tmp_path / 'straight'
  done = _run(spec, straight)
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'compare: ' in done.stdout
  want = (straight / 'results.csv').read_text()
  results = report_lib.read_results(straight / 'results.csv')
  assert len(results) == 2 * 2 * 2 + 2  # tune: 2 envs x 2 seeds x 2 rates.
  assert set(results.loc[results['stage'] == 'compare', 'learning_rate']) in (
    {3e-3},
    {3e-2},
  )

  # SIGINT: the running cell saves and the command says how to go on.
  out = tmp_path / 'stopped'
  stopped = _stopped(spec, out, signal.SIGINT, tmp_path)
  assert stopped.returncode == 128 + signal.SIGINT, stopped.stdout[-3000:]
  assert 'interrupted by SIGINT during tune/' in stopped.stdout
  assert 'Traceback' not in stopped.stdout
  again = _run(spec, out)
  assert again.returncode == 0, again.stderr[-3000:]
  assert (out / 'results.csv').read_text() == want
  assert (out / 'curves.csv').read_text() == (
    straight / 'curves.csv'
  ).read_text()

  # --report: the reports again, from the small files alone, byte for byte.
  files = {
    p: p.read_bytes()
    for stage in ('tune', 'compare')
    for p in sorted((out / stage).iterdir())
  }
  assert {p.name for p in files} >= {'report.md', 'curves.png'}
  for stage in ('tune', 'compare'):
    for p in (out / stage).iterdir():
      p.unlink()
  rebuilt = _in_process(call_main, spec, out, '--report')
  assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
  for path, content in files.items():
    assert path.read_bytes() == content, path

  # A changed setting in an existing cell: refused, nothing run.
  changed = _spec(tmp_path, **{'rollout_len=5': 'rollout_len=6'})
  refused = _in_process(call_main, changed, out)
  assert refused.returncode == 2
  lines = refused.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ')
  assert 'rollout_len: saved 5, given 6' in lines[0]

  # The small files alone (no run folders, as committed) are a finished
  # study: nothing runs again; a changed setting is still refused.
  shutil.rmtree(straight / 'runs')
  for name in ('tune', 'compare'):
    shutil.rmtree(straight / name)
  cells = []
  study_run.run_study(
    spec_lib_load(spec), straight, progress=False, on_cell=cells.append
  )
  assert cells == [] and (straight / 'results.csv').read_text() == want
  refused = _in_process(call_main, changed, straight)
  assert refused.returncode == 2
  assert 'Cell tune/jittable_catch[rows=5,columns=5]/actor_critic' in (
    refused.stderr
  )
  assert 'rollout_len: saved 5, given 6' in refused.stderr
  # A rule added to the tuning stage: its cells run, the pick is made again
  # from the finished stage (not the stale recorded one).
  one, two = "(Rule('actor_critic'),)", "(Rule('actor_critic'), Rule('ppo'))"
  added = _spec(tmp_path, **{f'rules={one}': f'rules={two}'})
  study = spec_lib_load(added)
  with pytest.raises(ValueError, match="Stage 'tune' has not finished"):
    study_run.run_study(study, straight, only='compare', progress=False)


# Two more runs of the study (35 s of the default suite's 20 min on
# 2026-12-03): in the slow target; the default one stops it with SIGINT.
@pytest.mark.slow
def test_a_killed_study_goes_on_with_the_same_command(tmp_path):
  """SIGKILL: nothing saved but the checkpoints; the same command goes on
  and gives the results of a study never stopped."""
  spec = _spec(tmp_path)
  straight = tmp_path / 'straight'
  assert _run(spec, straight).returncode == 0
  killed = tmp_path / 'killed'
  assert _stopped(spec, killed, signal.SIGKILL, tmp_path).returncode == -9
  again = _run(spec, killed)
  assert again.returncode == 0, again.stderr[-3000:]
  assert (killed / 'results.csv').read_text() == (
    straight / 'results.csv'
  ).read_text()


def test_pick_rates_states_its_procedure():
  """Normalised from random play to the environment's best mean cell; the
  mean over environments; the best rate per rule."""
  rows = []
  for env, _, by_rate in (
    ('a', 0.0, {1e-3: [1.0, 3.0], 1e-2: [4.0, 4.0]}),
    ('b', 10.0, {1e-3: [20.0, 20.0], 1e-2: [10.0, 12.0]}),
  ):
    for rate, finals in by_rate.items():
      for seed, final in enumerate(finals):
        rows.append(
          dict(
            env=env,
            rule='r',
            learning_rate=rate,
            seed=seed,
            final_return=final,
            study='s',
            stage='t',
          )
        )
  chosen, scores = study_run.pick_rates(
    pd.DataFrame(rows), {'a': 0.0, 'b': 10.0}
  )
  # a: best mean 4 (1e-2); 1e-3 scores 2/4. b: best mean 20 (1e-3); 1e-2
  # scores 1/10. Means: 1e-3 (0.5 + 1) / 2, 1e-2 (1 + 0.1) / 2.
  assert scores['r'] == pytest.approx({'0.001': 0.75, '0.01': 0.55})
  assert chosen == {'r': 1e-3}


@pytest.mark.parametrize(
  'make, message',
  [
    (lambda: spec_lib.Rule('sarsa'), "Unknown rule 'sarsa'"),
    (
      lambda: spec_lib.Rule('ppo', weights='x.npz'),
      "weights are a meta-learned rule's",
    ),
    (
      lambda: spec_lib.Stage(
        's', envs=('pong',), seeds=(0,), rates=(1e-3,), num_steps=1
      ),
      "Unknown Stage 's' env 'pong'",
    ),
    (
      lambda: spec_lib.Stage(
        's', envs=('jittable_catch',), seeds=(0, 0), rates=(1e-3,), num_steps=1
      ),
      'seeds must be distinct',
    ),
    (
      lambda: spec_lib.Stage(
        's', envs=('jittable_catch',), seeds=(0,), rates=(-1.0,), num_steps=1
      ),
      'rates must be finite learning rates > 0',
    ),
    (
      lambda: spec_lib.Stage(
        's',
        envs=('jittable_catch',),
        seeds=(0,),
        rates=(1e-3,),
        num_steps=1,
        settings=dict(seeds=(1,)),
      ),
      r"\['seeds'\] are set by the study",
    ),
    (
      lambda: spec_lib.Study(
        name='x',
        rules=(spec_lib.Rule('ppo'),),
        stages=(
          spec_lib.Stage(
            'a',
            envs=('jittable_catch',),
            seeds=(0,),
            rates=(1e-3,),
            num_steps=1,
          ),
          spec_lib.Stage(
            'b',
            envs=('jittable_catch',),
            seeds=(0,),
            rates=spec_lib.RatePick('a'),
            num_steps=1,
          ),
        ),
      ),
      'shares environments',
    ),
    (
      lambda: spec_lib.Study(
        name='x',
        rules=(spec_lib.Rule('ppo'),),
        stages=(
          spec_lib.Stage(
            'b',
            envs=('jittable_catch',),
            seeds=(0,),
            rates=spec_lib.RatePick('a'),
            num_steps=1,
          ),
        ),
      ),
      'not an earlier stage',
    ),
  ],
)
def test_bad_specs_name_what_is_wrong(make, message):
  with pytest.raises(ValueError, match=message):
    make()


def test_tiny_shrinks_every_cell_and_keeps_the_grid():
  study = spec_lib.Study(
    name='x',
    rules=(spec_lib.Rule('ppo'),),
    stages=(
      spec_lib.Stage(
        'a',
        envs=('jittable_catch',),
        seeds=(0, 1),
        rates=(1e-3,),
        num_steps=100,
      ),
    ),
    tiny=dict(num_steps=3, batch_size=8, replay_ratio=2, buffer_capacity=16),
  )
  small = study.shrunk()
  assert small.stages[0].num_steps == 3
  assert small.stages[0].seeds == (0, 1)
  config = study_run.cell_config(
    small, small.stages[0], 'jittable_catch', small.rules[0], (1e-3,)
  )
  assert (config.batch_size, config.num_steps, config.num_runs) == (8, 3, 2)
  assert dataclasses.replace(config, num_steps=3) == config


@pytest.mark.slow
def test_the_documented_example_runs_at_test_size(tmp_path):
  done = _run(ROOT / 'studies/catch_example.py', tmp_path / 'x', '--tiny')
  assert done.returncode == 0, done.stderr[-3000:]
  assert (tmp_path / 'x/held_out/report.md').is_file()
