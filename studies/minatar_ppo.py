"""PPO's cells of the MinAtar study (studies/minatar.py) alone.

The committed results of studies/minatar.py (docs/results/minatar) hold
Disco103's and the actor-critic's cells from before the study facility
recorded each cell's settings (cells.json), so running that spec into them
would run those cells again. This spec runs only PPO's cells, in the same
regime, seeds, rates and budget; their rows are then added to the
committed results.csv and curves.csv after the other rules' rows of the
same stage (the order run.py writes), their settings to cells.json, and
the reports rebuilt with `--report` (docs/studies/minatar.md, "PPO").

  disco-rl study studies/minatar_ppo.py --only sweep \
      --out runs/minatar_ppo     # done 2026-12-04 (18 min): rate 1e-2
  disco-rl study studies/minatar_ppo.py --only table \
      --out runs/minatar_ppo     # done 2026-12-04 (61 min): at 1e-2
"""

import dataclasses
import pathlib

from disco_rl.cli.study import load_study
from disco_rl.studies.spec import Rule

_minatar = load_study(pathlib.Path(__file__).with_name('minatar.py'))
_table = _minatar.stage('table')

# The study as it is, with PPO its one rule (no baseline among its rules).
STUDY = dataclasses.replace(
  _minatar,
  rules=(Rule('ppo'),),
  stages=(
    _minatar.stage('sweep'),
    dataclasses.replace(_table, rates=_table.rates['ppo']),
  ),
  baseline=None,
)
