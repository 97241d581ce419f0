"""Disco103's and the actor-critic's Breakout cells of the MinAtar study
(studies/minatar.py), run again through the study facility.

The committed cells of those two rules were run by the study's earlier
script (scripts/benchmark_minatar.py) and converted once into the
facility's files; PPO's cells were run by the facility
(studies/minatar_ppo.py). This spec runs the same cells (Breakout, seeds
0-2, each rule at its table rate, 3,000 updates) with today's package, to
check that it gives the committed results (docs/studies/minatar.md,
"PPO"):

  disco-rl study studies/minatar_rerun.py \
      --out runs/minatar_rerun
"""

import dataclasses
import pathlib

from disco_rl.cli.study import load_study
from disco_rl.studies.spec import Rule

_minatar = load_study(pathlib.Path(__file__).with_name('minatar.py'))
_table = _minatar.stage('table')
_rules = ('disco_103', 'actor_critic')

# The study as it is, its table on Breakout only, without PPO.
STUDY = dataclasses.replace(
  _minatar,
  rules=tuple(Rule(r) for r in _rules),
  stages=(
    dataclasses.replace(
      _table,
      envs=('gymnax:Breakout-MinAtar',),
      rates={r: _table.rates[r] for r in _rules},
    ),
  ),
)
