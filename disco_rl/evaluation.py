# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job's names (an agent trained by a fixed rule, e.g. Disco103),
for users and notebooks; they live in `disco_rl.loops`, but `run_eval`.
"""

from typing import Any

from disco_rl.actors import evaluate_policy
from disco_rl.agent import make_settings as agent_settings
from disco_rl.loops.config import EvalConfig
from disco_rl.loops.config import RULES
from disco_rl.loops.eval import EvalState
from disco_rl.loops.eval import make_eval
from disco_rl.loops.eval import seed_keys
from disco_rl.loops.trainer import Trainer
from disco_rl.metrics import MetricsWriter
from disco_rl.metrics import peak_memory_mb
from disco_rl.metrics import read_metrics
from disco_rl.metrics import resident_memory_mb
from disco_rl.plots import plot_curve

__all__ = (
    'EvalConfig', 'RULES', 'agent_settings', 'EvalState', 'evaluate_policy',
    'make_eval', 'run_eval', 'seed_keys', 'MetricsWriter', 'peak_memory_mb',
    'plot_curve', 'read_metrics', 'resident_memory_mb',
)


def run_eval(config: EvalConfig, output_dir, rule_params=None,
             progress: bool = True, **trainer_args) -> dict[str, Any]:
  """`Trainer(config, output_dir, ...).fit()`: an agent trained by the rule
  (default: Disco103), with metrics, a plot and checkpoints."""
  return Trainer(config, output_dir, rule_params=rule_params,
                 progress=progress, **trainer_args).fit()
