#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""One command that checks and measures the package on an accelerator.

On a machine without the package index (the lent GPU machine), after
`make gpu-bundle` here (wheels the device image lacks, the golden files and
the Disco103 weights, in the git-ignored folder .gpu):

  python3 scripts/gpu_check.py --bundle .gpu --out $OUT

installs the wheels into a temporary site, then runs the sections one after
another, each in its own process with its own time budget, so a section
that runs late is stopped and the results so far still come back:

  device    devices, versions, the matmul precision JAX starts with
  golden    the golden tests at JAX's default float32 matmul precision and
            at 'highest': for each case, the keys that pass at the suite's
            tolerance and the worst errors (per key in golden_keys.jsonl)
  eval      the fused eval loop (Disco103, Catch 8x8): learner and
            environment steps/s at the defaults (batch 64; also at matmul
            precision 'highest'), batch 256 and 1,024; target >= 125
            learner steps/s at the defaults
  minatar   acting only on Breakout-MinAtar with 1,024 and 4,096
            environments (environment steps/s), and the MinAtar training
            loop's learner steps/s
  meta      meta-training: meta-steps/s at the notebook's settings and with
            the paper preset on a population of 2
  runs      1, 9 and 36 runs (seeds x learning rates: 1x1, 3x3, 12x3) of
            the eval loop in one program: a sweep as one program (tiny: 1
            and 2x2)

Jobs are timed through the package's loop (`runtime.host_loop.run`, its
`Timing`); each row records its process's peak device memory so far (on a CPU:
peak resident memory). Writes results.json, results.md, golden_keys.jsonl and
log.txt to --out and prints the tables.

  python scripts/gpu_check.py --cpu --tiny --out /tmp/gpu_check

runs every section at tiny sizes on the CPU (tests/test_gpu_check.py), so
the check cannot rot between GPU runs. Exit status 0 when every section ran
(or was skipped by design), else 1: a section that measured nothing, or
whose process (or one it started) failed, says why in one line, e.g.
"failed (exit 1): pytest at matmul precisions 'default' and 'highest'
exited 1: /usr/bin/python3: No module named pytest".
"""

import argparse
import contextlib
import dataclasses
import glob
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ElementTree

REPO = pathlib.Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Section:
  name: str
  title: str
  budget_s: float  # On an accelerator at full sizes.
  tiny_budget_s: float  # On the CPU at tiny sizes.


SECTIONS = (
  Section('device', 'Device and versions', 30, 120),
  Section('golden', 'Golden tests at two matmul precisions', 130, 300),
  Section('eval', 'Fused eval loop (Disco103, Catch 8x8)', 110, 240),
  Section('minatar', 'MinAtar Breakout: acting and training', 60, 240),
  Section('meta', 'Meta-training', 140, 400),
  Section('runs', 'Runs (seeds x rates) in one program', 60, 120),
)
TOTAL_BUDGET_S = 470  # Under 8 minutes on one H100.
TINY_TOTAL_BUDGET_S = 1200
# A section is not started with less time than this left.
MIN_SECTION_S = 15
# Learner steps/s the loop-layer work targets at the eval defaults on a GPU
# (50x the upstream's CPU loop).
EVAL_TARGET_STEPS_PER_S = 125
# The packages whose versions are reported.
PACKAGES = (
  'jax jaxlib jax-cuda13-plugin jax-cuda12-plugin dm-haiku rlax distrax '
  'optax chex flax gymnax orbax-checkpoint numpy tfp-nightly '
  'tensorflow-probability'
).split()


# ----------------------------------------------------------------------------
# Inside a section's process.


class SectionFailed(Exception):
  """A section that compared or measured nothing, or whose subprocess
  failed; its message is the one-line reason the driver reports."""


def one_line(text: str, limit: int = 300) -> str:
  """`text` on one line (whitespace runs as one space), at most `limit`
  characters."""
  text = ' '.join(str(text).split())
  return text if len(text) <= limit else text[: limit - 3] + '...'


def failure_reason(error: BaseException) -> str:
  """One line naming why a section failed, from what it raised: a
  `SectionFailed`'s message, else the exception's type and message (e.g.
  "ModuleNotFoundError: No module named 'gymnax'")."""
  if isinstance(error, SectionFailed):
    return one_line(str(error))
  return one_line(f'{type(error).__name__}: {error}')


_ERROR_LINE = re.compile(r'^[\w.]*(Error|Exception)\b')


def reason_from_log(text: str) -> str:
  """The line of a failed process's output that says why: the last that
  names a missing module or starts with an exception's name, else the last
  non-empty line ('no output' if none)."""
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  for line in reversed(lines):
    if 'No module named' in line or _ERROR_LINE.match(line):
      return one_line(line)
  return one_line(lines[-1]) if lines else 'no output'


class Recorder:
  """Collects a section's rows and writes them to its file after each one,
  so that a section stopped at its budget keeps what it measured."""

  def __init__(self, path: pathlib.Path):
    self.path = path
    self.result = dict(rows=[], info={})

  def _write(self) -> None:
    tmp = self.path.with_suffix('.tmp')
    tmp.write_text(json.dumps(self.result, indent=1, default=float))
    tmp.replace(self.path)

  def info(self, **values) -> None:
    self.result['info'].update(values)
    self._write()

  def row(self, with_memory: bool = True, **values) -> None:
    if with_memory:
      values.update(memory())
    self.result['rows'].append(values)
    print(json.dumps(values, default=float), flush=True)
    self._write()


def memory() -> dict[str, float]:
  """Peak device memory of this process so far (MB), else peak RSS."""
  import jax  # pylint: disable=g-import-not-at-top

  from disco_rl.runtime import metrics as metrics_lib  # pylint: disable=g-import-not-at-top

  stats = jax.local_devices()[0].memory_stats() or {}
  if 'peak_bytes_in_use' in stats:
    return dict(peak_device_mb=round(stats['peak_bytes_in_use'] / 2**20, 1))
  return dict(peak_host_rss_mb=round(metrics_lib.peak_memory_mb(), 1))


def time_job(job, args):
  """Times `job` through the package's loop (`runtime.host_loop.run`): a
  first run to the end of the warm-up (the first call compiles), then at most
  `args.max_calls` more calls, stopped after `args.min_time_s` seconds.

  Returns:
    (compile and first call in seconds, steps per second after the
    warm-up and one more call, the steps that rate was timed over).
  """
  from disco_rl.runtime import host_loop  # pylint: disable=g-import-not-at-top

  per_call = job.steps_per_call
  warm = per_call * (1 + -(-job.warmup // per_call))
  rows = []
  first = host_loop.run(job, job.init(), warm, rows, progress=False)
  ends = []  # When each call of the timed run ended.

  def enough(state, new) -> bool:
    del state, new
    ends.append(time.perf_counter())
    return len(ends) > 1 and ends[-1] - ends[0] >= args.min_time_s

  timed = host_loop.run(
    job,
    first.state,
    warm + per_call * (args.max_calls + 1),
    rows,
    progress=False,
    on_call=enough,
  ).timing
  return first.timing.first_call_s, timed.steps_per_second, timed.steady_steps


def section_device(rec: Recorder, args) -> None:
  del args
  import importlib.metadata as metadata  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top

  versions = {}
  for name in PACKAGES:
    with contextlib.suppress(metadata.PackageNotFoundError):
      versions[name] = metadata.version(name)
  device = jax.devices()[0]
  rec.info(
    python=platform.python_version(),
    versions=versions,
    backend=jax.default_backend(),
    device_kind=device.device_kind,
    device_count=jax.device_count(),
    default_matmul_precision=str(jax.config.jax_default_matmul_precision),
  )
  print(jax.print_environment_info(return_string=True), flush=True)
  for d in jax.devices():
    rec.row(device=str(d), kind=d.device_kind, platform=d.platform)


GOLDEN_FILES = (
  'tests/test_golden_rules.py',
  'tests/test_golden_agent.py',
  'tests/test_golden_meta.py',
)
# At tiny sizes: two quick cases, enough to run the machinery.
GOLDEN_TINY = (
  'tests/test_golden_rules.py::test_policy_gradient_rule',
  'tests/test_golden_rules.py::test_disco_init_params_and_state',
)
GOLDEN_PRECISIONS = ('default', 'highest')


# The golden tests' command (the tests replace it to simulate a failure).
PYTEST = (sys.executable, '-m', 'pytest')


def _pytest_counts(xml_path: pathlib.Path) -> dict[str, int]:
  """passed/failed/errors/skipped from a JUnit XML report."""
  if not xml_path.is_file():
    return dict(passed=0, failed=0, errors=0, skipped=0)
  suite = ElementTree.parse(xml_path).getroot()
  suite = suite if suite.tag == 'testsuite' else suite.find('testsuite')
  tests, failed, errors, skipped = (
    int(suite.get(k, 0)) for k in ('tests', 'failures', 'errors', 'skipped')
  )
  return dict(
    passed=tests - failed - errors - skipped,
    failed=failed,
    errors=errors,
    skipped=skipped,
  )


def _pytest_skip_reason(xml_path: pathlib.Path) -> str | None:
  """The first skipped test's reason in a JUnit XML report (None: none)."""
  if not xml_path.is_file():
    return None
  skipped = ElementTree.parse(xml_path).getroot().find('.//skipped')
  return None if skipped is None else skipped.get('message')


def golden_summary(lines: list[dict]) -> list[dict]:
  """One row per (case, reference): keys, failures, worst errors."""
  groups = {}
  for line in lines:
    groups.setdefault((line['case'], line['reference']), []).append(line)
  rows = []
  for (case, reference), keys in sorted(groups.items()):
    failing = [k['key'] for k in keys if not k['passed']]
    worst = lambda name, keys=keys: max(
      (k[name] for k in keys if name in k), default=0.0
    )
    rows.append(
      dict(
        case=case,
        reference=reference,
        keys=len(keys),
        keys_passed=len(keys) - len(failing),
        worst_tol_ratio=worst('tol_ratio'),
        worst_leaf_rel_err=worst('leaf_rel_err'),
        worst_max_abs_err=worst('max_abs_err'),
        failing_keys=failing[:8],
      )
    )
  return rows


def section_golden(rec: Recorder, args) -> None:
  """Runs the golden tests at each precision, both at once, and summarises.

  The tests run in report mode ($DISCO_RL_GOLDEN_REPORT, see
  tests/golden_cases.py): every key is compared and recorded, none fails
  the test, so each case's failing keys are all listed.

  Raises:
    SectionFailed: a pytest process exited non-zero (the reason names its
      precision, exit status and the line of its output that says why), or
      no case was compared at a precision.
  """
  out = pathlib.Path(args.out)
  tests = list(GOLDEN_TINY if args.tiny else GOLDEN_FILES)
  # The tight reference (current_jax) only, at full sizes.
  select = [] if args.tiny else ['-k', 'current_jax']
  work = pathlib.Path(tempfile.mkdtemp(prefix='golden_'))
  procs = {}
  for precision in GOLDEN_PRECISIONS:
    env = dict(
      os.environ,
      JAX_DEFAULT_MATMUL_PRECISION=precision,
      DISCO_RL_GOLDEN_REPORT=str(work / f'{precision}.jsonl'),
      # Both processes share the device.
      XLA_PYTHON_CLIENT_PREALLOCATE='false',
    )
    # The comparisons run at XLA's usual optimisation.
    env.pop('JAX_DISABLE_MOST_OPTIMIZATIONS', None)
    log = open(work / f'{precision}.log', 'w')  # pylint: disable=consider-using-with
    procs[precision] = (
      subprocess.Popen(
        [*PYTEST, *'-q -p no:cacheprovider -p no:xdist --junitxml'.split()]
        + [str(work / f'{precision}.xml'), *select, *tests],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
      ),
      log,
    )
  start = time.perf_counter()
  exits, logs = {}, {}
  for precision, (proc, log) in procs.items():
    proc.wait()
    log.close()
    exits[precision] = proc.returncode
    logs[precision] = (work / f'{precision}.log').read_text()
    print(
      f'--- pytest at matmul precision {precision!r} (exit {proc.returncode}):',
      flush=True,
    )
    print(logs[precision][-3000:], flush=True)
  rec.info(
    pytest_wall_s=round(time.perf_counter() - start, 1),
    tests=tests,
    select=select,
    pytest_exit={p: exits[p] for p in GOLDEN_PRECISIONS},
  )
  compared, nothing = {}, []
  for precision in GOLDEN_PRECISIONS:
    report = work / f'{precision}.jsonl'
    lines = (
      [json.loads(x) for x in report.read_text().splitlines()]
      if report.is_file()
      else []
    )
    with open(out / 'golden_keys.jsonl', 'a') as f:
      for line in lines:
        f.write(json.dumps(dict(line, precision=precision)) + '\n')
    counts = _pytest_counts(work / f'{precision}.xml')
    rec.info(**{f'pytest_{precision}': counts})
    if not lines:
      rec.row(
        precision=precision,
        case='(no comparison recorded)',
        with_memory=False,
        **counts,
      )
      if not exits[precision]:  # A failed process is reported below.
        skip = _pytest_skip_reason(work / f'{precision}.xml')
        nothing.append(
          f'no case compared at matmul precision '
          f'{precision!r} ({counts["passed"]} passed, '
          f'{counts["skipped"]} skipped' + (f': {skip}' if skip else '') + ')'
        )
    summary = golden_summary(lines)
    compared[precision] = len(summary)
    for row in summary:
      # The tests ran in processes of their own: no memory figure here.
      rec.row(precision=precision, with_memory=False, **row)
  rec.info(cases_compared=compared)
  shutil.rmtree(work, ignore_errors=True)
  # One clause per failure; precisions that failed alike share it.
  failed = {}
  for precision in GOLDEN_PRECISIONS:
    if exits[precision]:
      why = (exits[precision], reason_from_log(logs[precision]))
      failed.setdefault(why, []).append(repr(precision))
  problems = [
    f'pytest at matmul precision{"s" * (len(names) > 1)} '
    f'{" and ".join(names)} exited {code}: {why}'
    for (code, why), names in failed.items()
  ] + nothing
  if problems:
    raise SectionFailed('; '.join(problems))


def _eval_config(args, **overrides):
  from disco_rl.jobs import config as config_lib  # pylint: disable=g-import-not-at-top

  settings = dict(steps_per_call=50)
  if args.tiny:
    settings.update(
      env_kwargs=dict(rows=5, columns=5),
      dense=(16,),
      model_lstm_size=8,
      model_head_hiddens=(8,),
      batch_size=8,
      replay_ratio=2,
      buffer_capacity=32,
      rollout_len=4,
      steps_per_call=5,
    )
  settings.update(overrides)
  return config_lib.EvalConfig(**settings)


def measure_eval_loop(rec: Recorder, args, label: str, config, **extra):
  """Learner and environment steps/s of the fused loop for `config`."""
  from disco_rl.jobs.eval import job as eval_lib  # pylint: disable=g-import-not-at-top

  first_call_s, steps_per_s, timed = time_job(eval_lib.make_eval(config), args)
  runs = config.num_runs
  if runs > 1:  # Per run; and of all the runs together.
    extra.update(
      runs=runs, all_runs_learner_steps_per_s=round(steps_per_s * runs, 2)
    )
  rec.row(
    run=label,
    batch=config.batch_size,
    envs=config.num_envs,
    rollout_len=config.rollout_len,
    matmul_precision=config.matmul_precision,
    first_call_s=round(first_call_s, 2),
    learner_steps_per_s=round(steps_per_s, 2),
    env_steps_per_s=round(
      steps_per_s * config.num_envs * config.rollout_len, 1
    ),
    timed_steps=timed,
    **extra,
  )
  return steps_per_s


def section_eval(rec: Recorder, args) -> None:
  target = None if args.tiny else EVAL_TARGET_STEPS_PER_S
  speed = measure_eval_loop(
    rec, args, 'defaults', _eval_config(args), target=target
  )
  rec.info(meets_target=None if target is None else speed >= target)
  # Tiny: the defaults' program at another batch size adds nothing to run.
  batches = () if args.tiny else (256, 1024)
  for batch in batches:
    measure_eval_loop(
      rec,
      args,
      f'batch {batch}',
      _eval_config(args, batch_size=batch, buffer_capacity=16 * batch),
    )
  measure_eval_loop(
    rec,
    args,
    'defaults, highest',
    _eval_config(args, matmul_precision='highest'),
  )


MINATAR_GAME = 'Breakout'


def minatar_config(args, learning_rate: float = 3e-3):
  """The MinAtar study's cell of Disco103 on Breakout, one run
  (studies/minatar.py, the one place its regime is written; --tiny: the
  study's test size)."""
  from disco_rl.cli import study as study_cli  # pylint: disable=g-import-not-at-top
  from disco_rl.studies import run as study_run  # pylint: disable=g-import-not-at-top

  study = study_cli.load_study(REPO / 'studies' / 'minatar.py')
  if args.tiny:
    study = study.shrunk()
  config = study_run.cell_config(
    study,
    study.stage('table'),
    f'gymnax:{MINATAR_GAME}-MinAtar',
    study.rule('disco_103'),
    (learning_rate,),
  )
  return dataclasses.replace(config, seeds=(0,), debug_checks=False)


def measure_acting(rec: Recorder, args, num_envs: int) -> None:
  """Environment steps/s of Disco103's agent acting alone (no learning)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from disco_rl import actors  # pylint: disable=g-import-not-at-top
  from disco_rl import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from disco_rl import environments  # pylint: disable=g-import-not-at-top

  config = minatar_config(args, learning_rate=1e-3)
  env = environments.get_environment(
    config.env, batch_size=num_envs, env_settings=config.env_kwargs
  )
  settings = config.agent_settings('disco_103')
  agent = agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=settings,
    batch_axis_name=None,
  )
  rollout_len, rollouts = config.rollout_len, (2 if args.tiny else 10)
  key = jax.random.PRNGKey(0)
  params = agent.initial_learner_state(key).params
  env_state, timestep = env.reset(key)
  carry = (agent.initial_actor_state(key), timestep, env_state)

  @jax.jit
  def act(params, carry, rng):
    def one(carry, rng):
      actor_state, timestep, env_state = carry
      rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
        params,
        actor_state,
        timestep,
        env_state,
        rng,
        env,
        rollout_len,
        agent.actor_step,
      )
      return (actor_state, timestep, env_state), jnp.sum(rollout.rewards)

    return jax.lax.scan(one, carry, jax.random.split(rng, rollouts))

  # Acting alone has no job of the package's to run it: timed here, the
  # first call (which compiles) apart, then up to max_calls calls or
  # min_time_s seconds.
  keys = iter(jax.random.split(key, args.max_calls + 1))
  times = [time.perf_counter()]
  for rng in keys:
    carry, rewards = act(params, carry, rng)
    jax.block_until_ready(rewards)
    times.append(time.perf_counter())
    if len(times) > 2 and times[-1] - times[1] >= args.min_time_s:
      break
  first_call_s, seconds = times[1] - times[0], times[-1] - times[1]
  calls = len(times) - 2
  rec.row(
    run=f'acting, {num_envs} envs',
    envs=num_envs,
    rollout_len=rollout_len,
    first_call_s=round(first_call_s, 2),
    env_steps_per_s=round(
      calls * rollouts * rollout_len * num_envs / seconds, 1
    ),
  )


def section_minatar(rec: Recorder, args) -> None:
  for num_envs in (8,) if args.tiny else (1024, 4096):
    measure_acting(rec, args, num_envs)
  # The MinAtar study's training loop (studies/minatar.py).
  config = minatar_config(args)
  measure_eval_loop(rec, args, 'training loop', config)


def measure_meta(rec: Recorder, args, label: str, config) -> None:
  """Meta-steps/s of the fused meta-training loop for `config`."""
  from disco_rl.jobs.meta import job as meta_lib  # pylint: disable=g-import-not-at-top

  job = meta_lib.make_meta_train(config)
  first_call_s, steps_per_s, timed = time_job(job, args)
  rec.row(
    run=label,
    agents=config.num_agents,
    batch_per_agent=config.batch_size_per_device,
    rollout_len=config.rollout_len,
    inner_steps=config.num_inner_steps,
    matmul_precision=config.matmul_precision,
    population=job.setup.population,
    first_call_s=round(first_call_s, 2),
    meta_steps_per_s=round(steps_per_s, 3),
    timed_meta_steps=timed,
  )


def section_meta(rec: Recorder, args) -> None:
  from disco_rl.jobs.meta import config as meta_config  # pylint: disable=g-import-not-at-top

  tiny = dict(
    num_agents=2,
    batch_size_per_device=2,
    rollout_len=4,
    dense=(8,),
    model_lstm_size=8,
    model_head_hiddens=(8,),
    value_dense=(8,),
    steps_per_call=2,
  )
  if not args.tiny:  # At tiny sizes the paper's recipe alone: its code
    # path holds the notebook's (looped and unrolled updates differ only in
    # a setting), and each meta compile costs half a minute on a CPU.
    notebook = meta_config.MetaTrainConfig(steps_per_call=10)
    measure_meta(rec, args, 'notebook settings', notebook)
  # The paper's meta-optimisation on a population of 2 (its window of 20
  # updates, a loop with remat; 3 updates at tiny sizes, looped too).
  small = (
    dict(tiny, num_inner_steps=3, max_unrolled_inner_steps=0, agent_lifetime=6)
    if args.tiny
    else dict(steps_per_call=2)
  )
  from disco_rl.cli import meta_train as command  # pylint: disable=g-import-not-at-top

  paper = meta_config.MetaTrainConfig(
    **{**command.PRESETS['paper'], **small, 'num_agents': 2}
  )
  measure_meta(rec, args, 'paper preset, 2 agents', paper)


def section_runs(rec: Recorder, args) -> None:
  """The eval loop's defaults with 1, 9 and 36 runs in one program, every
  seed at every learning rate: steps/s of each run and of all together
  (tiny: 1 and 4 runs)."""
  rates = (1e-4, 3e-4, 1e-3)
  grids = ((1, 1), (2, 2)) if args.tiny else ((1, 1), (3, 3), (12, 3))
  for num_seeds, num_rates in grids:
    runs = num_seeds * num_rates
    measure_eval_loop(
      rec,
      args,
      f'{runs} run' + 's' * (runs > 1) + f' ({num_seeds}x{num_rates})',
      _eval_config(
        args,
        seeds=tuple(range(num_seeds)),
        learning_rates=rates[:num_rates],
      ),
    )


SECTION_FNS = dict(
  device=section_device,
  golden=section_golden,
  eval=section_eval,
  minatar=section_minatar,
  meta=section_meta,
  runs=section_runs,
)


def run_section(args) -> int:
  """The body of one section's process: writes its rows to args.result.

  Returns:
    0, or 1 when the section raised or recorded no row (then its result's
    info holds `failure`, the one-line reason, and the traceback is in the
    log).
  """
  rec = Recorder(pathlib.Path(args.result))
  rec.info(started=time.strftime('%Y-%m-%d %H:%M:%S'))
  try:
    SECTION_FNS[args.section](rec, args)
    if not rec.result['rows'] and 'skipped' not in rec.result['info']:
      raise SectionFailed('measured nothing: the section recorded no row')
  except Exception as e:  # pylint: disable=broad-exception-caught
    traceback.print_exc()
    rec.info(failure=failure_reason(e))
    print(
      f'section {args.section} failed: {rec.result["info"]["failure"]}',
      flush=True,
    )
    return 1
  return 0


# ----------------------------------------------------------------------------
# The driver: wheels, sections in processes, results.


def install_wheels(bundle: pathlib.Path) -> str | None:
  """Installs bundle/wheels/*.whl into a temporary site; returns its path."""
  wheels = sorted(glob.glob(str(bundle / 'wheels' / '*.whl')))
  if not wheels:
    return None
  site = tempfile.mkdtemp(prefix='disco_rl_site_')
  subprocess.run(
    [
      sys.executable,
      '-m',
      'pip',
      'install',
      '-q',
      '--no-index',
      '--no-deps',
      '--no-compile',
      '--no-cache-dir',
      '--disable-pip-version-check',
      '--target',
      site,
      *wheels,
    ],
    check=True,
  )
  print(f'installed {len(wheels)} wheels into {site}', flush=True)
  return site


def section_env(args, site: str | None) -> dict[str, str]:
  """The environment of the sections' processes."""
  env = dict(os.environ, PYTHONUNBUFFERED='1')
  paths = [p for p in (site, str(REPO), env.get('PYTHONPATH')) if p]
  env['PYTHONPATH'] = os.pathsep.join(paths)
  if args.cpu:
    env['JAX_PLATFORMS'] = 'cpu'
  if args.bundle:
    bundle = pathlib.Path(args.bundle).resolve()
    if (bundle / 'weights' / 'disco_103.npz').is_file():
      env['DISCO_RL_WEIGHTS'] = str(bundle / 'weights' / 'disco_103.npz')
    if (bundle / 'golden' / 'golden.py').is_file():
      env['DISCO_RL_GOLDEN_DIR'] = str(bundle / 'golden')
  return env


def _cell(value) -> str:
  if isinstance(value, float):
    return f'{value:.4g}'
  if isinstance(value, (list, tuple)):
    return ', '.join(map(str, value)) or '-'
  return '-' if value is None else str(value)


def markdown(results: dict) -> str:
  """results.md: the device line, then one table per section."""
  lines = ['# GPU check', '']
  device = results['sections'].get('device', {}).get('info', {})
  if device:
    lines += [
      f'{device.get("device_kind")} x {device.get("device_count")} '
      f'({device.get("backend")}), Python {device.get("python")}; '
      + ', '.join(f'{k} {v}' for k, v in device.get('versions', {}).items()),
      '',
    ]
  lines += [f'Mode: {results["mode"]}; total {results["wall_s"]:.0f} s.', '']
  for section in results['sections'].values():
    lines += [
      f'## {section["title"]}',
      '',
      f'{section["status"]} in {section["wall_s"]:.0f} s '
      f'(budget {section["budget_s"]:.0f} s)',
    ]
    info = {
      k: v
      for k, v in section.get('info', {}).items()
      if k not in ('versions', 'started')
    }
    if info:
      lines += [''] + [f'- {k}: {_cell(v)}' for k, v in info.items()]
    if section.get('error'):
      lines += ['', '```', section['error'], '```']
    rows = section.get('rows', [])
    if rows:
      columns = list(dict.fromkeys(k for r in rows for k in r))
      lines += [
        '',
        '| ' + ' | '.join(columns) + ' |',
        '|' + '---|' * len(columns),
      ]
      lines += [
        '| ' + ' | '.join(_cell(r.get(c)) for c in columns) + ' |' for r in rows
      ]
    lines.append('')
  return '\n'.join(lines)


def write_results(out: pathlib.Path, results: dict) -> None:
  (out / 'results.json').write_text(
    json.dumps(results, indent=1, default=float)
  )
  (out / 'results.md').write_text(markdown(results))


def run_all(args) -> int:
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  for name in ('results.json', 'results.md', 'golden_keys.jsonl', 'log.txt'):
    if (out / name).exists():
      raise SystemExit(f'error: {out / name} exists: choose an empty --out')
  start = time.perf_counter()
  total = args.budget_s or (
    TINY_TOTAL_BUDGET_S if args.tiny else TOTAL_BUDGET_S
  )
  deadline = start + total
  site = None
  if args.bundle:
    site = install_wheels(pathlib.Path(args.bundle))
  env = section_env(args, site)
  chosen = args.sections or [s.name for s in SECTIONS]
  unknown = sorted(set(chosen) - set(SECTION_FNS))
  if unknown:
    raise SystemExit(
      f'error: unknown sections {unknown}; expected some of {list(SECTION_FNS)}'
    )
  results = dict(
    mode=('cpu' if args.cpu else 'accelerator')
    + (', tiny' if args.tiny else ''),
    command=' '.join(sys.argv),
    total_budget_s=total,
    sections={},
    wall_s=0.0,
  )
  work = pathlib.Path(tempfile.mkdtemp(prefix='gpu_check_'))
  failed = False
  for section in SECTIONS:
    if section.name not in chosen:
      continue
    budget = section.tiny_budget_s if args.tiny else section.budget_s
    budget = min(budget, deadline - time.perf_counter())
    record = dict(
      title=section.title,
      budget_s=max(budget, 0.0),
      rows=[],
      info={},
      wall_s=0.0,
    )
    results['sections'][section.name] = record
    if budget < MIN_SECTION_S:
      record['status'] = 'skipped: the total budget is spent'
      failed = True
      write_results(out, results)
      continue
    result_file = work / f'{section.name}.json'
    command = [
      sys.executable,
      str(pathlib.Path(__file__).resolve()),
      '--section',
      section.name,
      '--result',
      str(result_file),
      '--out',
      str(out),
      '--min-time-s',
      str(args.min_time_s),
      '--max-calls',
      str(args.max_calls),
    ]
    command += ['--tiny'] if args.tiny else []
    section_vars = dict(env)
    if args.fast_compile and section.name not in ('device', 'golden'):
      section_vars['JAX_DISABLE_MOST_OPTIMIZATIONS'] = 'true'
    print(
      f'== {section.name}: {section.title} (budget {budget:.0f} s)', flush=True
    )
    section_start = time.perf_counter()
    with open(out / 'log.txt', 'a') as log:
      log.write(f'\n== {section.name}: {section.title}\n')
      log.flush()
      log_start = (out / 'log.txt').stat().st_size
      proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=section_vars,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
      )
      try:
        proc.wait(timeout=budget)
        timed_out = False
      except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # The section and any process it started.
        proc.wait()
        timed_out = True
    record['wall_s'] = time.perf_counter() - section_start
    if result_file.is_file():
      record.update(json.loads(result_file.read_text()))
    failure = record['info'].pop('failure', None)
    if timed_out:
      status = f'timed out after {budget:.3g} s'
    elif proc.returncode:
      with open(out / 'log.txt', 'rb') as log:
        log.seek(log_start)
        section_log = log.read().decode(errors='replace')
      status = f'failed (exit {proc.returncode}): ' + (
        failure or reason_from_log(section_log)
      )
    elif 'skipped' in record['info']:
      status = 'skipped: ' + record['info'].pop('skipped')
    elif not record['rows']:
      status = 'failed: measured nothing: the section recorded no row'
    else:
      status = 'ok'
    record['status'] = status
    if not status.startswith(('ok', 'skipped')):
      failed = True
      text = (out / 'log.txt').read_text().splitlines()
      record['error'] = '\n'.join(text[-15:])
    print(f'   {status} in {record["wall_s"]:.0f} s', flush=True)
    results['wall_s'] = time.perf_counter() - start
    write_results(out, results)
  results['wall_s'] = time.perf_counter() - start
  write_results(out, results)
  shutil.rmtree(work, ignore_errors=True)
  print(markdown(results), flush=True)
  return 1 if failed else 0


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__.split('\n')[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  names = ' '.join(s.name for s in SECTIONS)
  budgets = f'{TOTAL_BUDGET_S}; --tiny {TINY_TOTAL_BUDGET_S}'
  add = parser.add_argument
  add('--out', required=True, help='folder for the results (a new one)')
  add('--bundle', metavar='DIR', help='what `make gpu-bundle` prepared')
  add('--cpu', action='store_true', help='run on the CPU')
  add('--tiny', action='store_true', help='tiny sizes (minutes on a CPU)')
  add(
    '--fast-compile',
    action='store_true',
    help="XLA's expensive optimisations off in the timed sections (for "
    'the tiny CPU test, whose numbers mean nothing)',
  )
  add('--sections', nargs='*', help=f'only these (default: all of {names})')
  add('--budget-s', type=float, help=f'total time (default: {budgets})')
  add(
    '--min-time-s',
    type=float,
    help='time each measurement at least this long (default: 3; --tiny 0)',
  )
  add(
    '--max-calls',
    type=int,
    help='at most this many timed calls per '
    'measurement (default: 40; --tiny 2)',
  )
  add('--section', help=argparse.SUPPRESS)
  add('--result', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.min_time_s is None:
    args.min_time_s = 0.0 if args.tiny else 3.0
  if args.max_calls is None:
    args.max_calls = 2 if args.tiny else 40
  if args.section:
    return run_section(args)
  return run_all(args)


if __name__ == '__main__':
  sys.exit(main())
