# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""DiscoRL: the Disco103 meta-learned RL update rule in JAX/Haiku."""

__version__ = '0.1.0'
