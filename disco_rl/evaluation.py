# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job (an agent trained by a fixed rule, e.g. Disco103).

The loop itself lives in `disco_rl.loops` (`loops.eval_program`, the
program; `loops.eval_loop` and `loops.host_eval_loop`, its two loops); this
module keeps the names users and notebooks import from `disco_rl.evaluation`.
"""

from disco_rl.loops.config import EvalConfig
from disco_rl.loops.config import RULES
from disco_rl.loops.config import agent_settings
from disco_rl.loops.config import check_eval_config as check_config
from disco_rl.loops.eval_job import make_eval_loop
from disco_rl.loops.eval_loop import EvalLoop
from disco_rl.loops.eval_program import EvalState
from disco_rl.loops.eval_setup import seed_keys
from disco_rl.loops.host_eval_loop import HostEvalLoop
from disco_rl.loops.reporting import MetricsWriter
from disco_rl.loops.reporting import peak_memory_mb
from disco_rl.loops.reporting import plot_curve
from disco_rl.loops.reporting import read_metrics
from disco_rl.loops.reporting import resident_memory_mb
from disco_rl.loops.trainer import run_eval

__all__ = (
    'EvalConfig', 'RULES', 'agent_settings', 'check_config', 'EvalLoop',
    'EvalState', 'HostEvalLoop', 'make_eval_loop', 'run_eval', 'seed_keys',
    'MetricsWriter', 'peak_memory_mb', 'plot_curve', 'read_metrics',
    'resident_memory_mb',
)
