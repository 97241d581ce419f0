# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Command-line jobs: `python -m disco_rl.examples.eval` / `.meta_train`."""


def parse_sizes(text: str) -> tuple[int, ...]:
  """'512,512' -> (512, 512): layer sizes given on the command line."""
  return tuple(int(x) for x in text.split(',') if x)
