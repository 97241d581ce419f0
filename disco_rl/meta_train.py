# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-training an update rule with a population of agents.

The names users and notebooks import from `disco_rl.meta_train`: the
objective (`disco_rl.meta_objective`: one agent's meta-loss and
meta-gradient), the settings (`disco_rl.loops.config`), the job
(`disco_rl.loops.meta`) and `run_meta_train`.
"""

from typing import Any

from disco_rl.loops.config import MetaTrainConfig
from disco_rl.loops.config import META_TRAIN_PRESETS
from disco_rl.loops.config import meta_train_preset
from disco_rl.loops.meta import PopulationState
from disco_rl.loops.meta import make_meta_train
from disco_rl.loops.trainer import Trainer
from disco_rl.meta_objective import MetaLossWeights
from disco_rl.meta_objective import MetaTrainAgent
from disco_rl.meta_objective import MetaTrainState
from disco_rl.meta_objective import calculate_meta_gradient
from disco_rl.meta_objective import catch_env
from disco_rl.meta_objective import default_value_fn_config
from disco_rl.meta_objective import meta_loss
from disco_rl.meta_objective import save_params

__all__ = (
    'MetaTrainConfig', 'META_TRAIN_PRESETS', 'meta_train_preset',
    'PopulationState', 'make_meta_train', 'run_meta_train',
    'MetaLossWeights', 'MetaTrainAgent', 'MetaTrainState',
    'calculate_meta_gradient', 'catch_env', 'default_value_fn_config',
    'meta_loss', 'save_params',
)


def run_meta_train(config: MetaTrainConfig, output_dir,
                   progress: bool = True, update_rule_params=None,
                   **trainer_args) -> dict[str, Any]:
  """`Trainer(config, output_dir, ...).fit()`: a rule meta-trained, with
  metrics, plots, checkpoints and the learned rule's file."""
  return Trainer(config, output_dir, rule_params=update_rule_params,
                 progress=progress, **trainer_args).fit()
