# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Gate G1 (issue 69, docs/studies/lpg_transfer.md) for the rules of the
`lpg_actor` preset (policy target 'action_pg'): fresh table agents trained
by a rule meta-trained here from random parameters, against the
actor-critic, on LPG's fixed gridworlds that the meta-training never
draws.

  disco-rl study studies/lpg_gridworlds_actor.py \
      --out runs/lpg_gridworlds_actor
  disco-rl study studies/lpg_gridworlds_actor.py \
      --out runs/lpg_gridworlds_actor_tiny --tiny     # test size

The procedure is `lpg_gridworlds_l1000.py`'s (`g1_study`: its agents,
budget, tuning layouts and seeds, SGD rates for the rules and G1's Adam
grid for the actor-critic, the held-out stage for the one candidate with
the best tuning score), fixed here before any cell ran (2026-12-07). The
actor-critic's cells are the same as that study's, so a copy of its
finished tune/actor_critic cells counts as run.

- Candidates: the last rule (meta-step 3,000) of each of the two
  meta-training seeds of ACT_PG_SGD_GROOVE_L2_0.25_L1000 (seed 4, rule
  seed 1; seed 5, rule seed 2). Both were measured on the held-out
  gridworlds as progress checks before this study (seed 4's at SGD 40
  and 10, seed 5's at 40; no pick: docs/studies/lpg_transfer.md);
  nothing here is chosen on those.
- `HELD_OUT_RULE` was written here once the tuning stage had finished.
"""

import pathlib
import runpy

_L1000 = runpy.run_path(
  str(pathlib.Path(__file__).with_name('lpg_gridworlds_l1000.py'))
)
# Relative to this file's folder; export_rule's npz files (the tiny sizes,
# the action head).
CANDIDATES = {
  'actor_s4_3000': '../docs/results/lpg_transfer/l1000_pg/rule_step_3000.npz',
  'actor_s5_3000': (
    '../docs/results/lpg_transfer/l1000_pg/seed5/rule_step_3000.npz'
  ),
}
# Set from the tuning stage's scores (the procedure above): on 2026-12-08
# actor_s5_3000 at SGD 80 scored 0.936, actor_s4_3000 at 80 0.882 (the
# actor-critic at 3e-2 0.724).
HELD_OUT_RULE = 'actor_s5_3000'
RULE_SETTINGS = dict(_L1000['RULE_SETTINGS'], policy_target='action_pg')

STUDY = _L1000['g1_study'](
  'lpg_gridworlds_actor', CANDIDATES, RULE_SETTINGS, HELD_OUT_RULE
)
