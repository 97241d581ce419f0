# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Examples: `python -m disco_rl.examples.custom_env` (your own environment
trained with Disco103). The commands are `disco_rl.cli` (`disco-rl`)."""
