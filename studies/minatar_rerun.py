"""Disco103's and the actor-critic's Breakout cells of the MinAtar study
(studies/minatar.py), run again through the study facility.

The committed cells of those two rules were run by the study's earlier
script (scripts/benchmark_minatar.py) and converted once into the
facility's files; PPO's cells were run by the facility
(studies/minatar_ppo.py). This spec runs the same cells (Breakout, seeds
0-2, each rule at its table rate, 3,000 updates) with today's package, to
check that it gives the committed results (docs/studies/minatar.md,
"PPO"):

  python -m disco_rl.examples.study studies/minatar_rerun.py \
      --out runs/minatar_rerun
"""

import importlib.util
import pathlib

from disco_rl.studies.spec import Rule
from disco_rl.studies.spec import Stage
from disco_rl.studies.spec import Study

_path = pathlib.Path(__file__).with_name('minatar.py')
_loader = importlib.util.spec_from_file_location('minatar_study', _path)
assert _loader is not None and _loader.loader is not None
minatar = importlib.util.module_from_spec(_loader)
_loader.loader.exec_module(minatar)
_table = minatar.STUDY.stage('table')
_rules = ('disco_103', 'actor_critic')

STUDY = Study(
  name='minatar',
  base=minatar.BASE,
  rules=tuple(Rule(r) for r in _rules),
  stages=(
    Stage(
      'table',
      envs=(minatar.env('Breakout'),),
      seeds=_table.seeds,
      rates={r: minatar.TABLE_RATES[r] for r in _rules},
      num_steps=_table.num_steps,
    ),
  ),
  references=minatar.STUDY.references,
  baseline='actor_critic',
  tiny=minatar.STUDY.tiny,
)
