# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Studies: grids of rules, environments, learning rates and seeds, and
their statistics and reports (`stats`: interquartile means, probability of
improvement, performance profiles and their stratified-bootstrap intervals,
the numbers the `rliable` library gives; `measure`: a run's final return,
random play, normalised scores, compact curves; `report`: tables and
figures from a study's results and curves alone)."""
