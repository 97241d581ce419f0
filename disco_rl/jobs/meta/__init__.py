# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-training job: a population of agents training a rule, as in
the upstream's meta-training notebook.

config.py   its settings and the task suite (`MetaTrainConfig`, tasks)
setup.py    the agents, their environments, the rule's optimiser, the
            layout of its state, the population's start and renewal
steps.py    the meta-step's parts, module functions of (setup, ...): an
            agent's meta-gradient, the groups', the meta-step
job.py      `make_meta_train(config) -> Job`: the program and the checks
            of its calls; `evaluate`, `rule`, `read_rule`
report.py   rows, summary, plots
probe.py    the meta-gradient's parts measured on fresh agents
"""
