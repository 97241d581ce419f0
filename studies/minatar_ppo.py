"""PPO's cells of the MinAtar study (studies/minatar.py) alone.

The committed results of studies/minatar.py (docs/results/minatar) hold
Disco103's and the actor-critic's cells from before the study facility
recorded each cell's settings (cells.json), so running that spec into them
would run those cells again. This spec runs only PPO's cells, in the same
regime, seeds, rates and budget; their rows are then added to the
committed results.csv and curves.csv after the other rules' rows of the
same stage (the order run.py writes), their settings to cells.json, and
the reports rebuilt with `--report` (docs/studies/minatar.md, "PPO").

  python -m disco_rl.examples.study studies/minatar_ppo.py --only sweep \
      --out runs/minatar_ppo     # done 2026-12-04 (18 min): rate 1e-2
  python -m disco_rl.examples.study studies/minatar_ppo.py --only table \
      --out runs/minatar_ppo     # done 2026-12-04 (48 min): at 1e-2
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

_sweep = minatar.STUDY.stage('sweep')
_table = minatar.STUDY.stage('table')

STUDY = Study(
  name='minatar',
  base=minatar.BASE,
  rules=(Rule('ppo'),),
  stages=(
    Stage(
      'sweep',
      envs=_sweep.envs,
      seeds=_sweep.seeds,
      rates=_sweep.rates,
      num_steps=_sweep.num_steps,
    ),
    Stage(
      'table',
      envs=_table.envs,
      seeds=_table.seeds,
      rates=_table.rates['ppo'],
      num_steps=_table.num_steps,
    ),
  ),
  references=minatar.STUDY.references,
  tiny=minatar.STUDY.tiny,
)
