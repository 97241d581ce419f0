# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Records the upstream meta-training notebook's first meta-steps.

    python tests/record_upstream_meta_steps.py UPSTREAM_DIR [--steps N]
        [--weights PATH/disco_103.npz]
        [--out tests/data/upstream_meta_train_steps.json]

UPSTREAM_DIR is an unpacked upstream checkout (the folder holding
`disco_rl/` and `colabs/meta_train.ipynb`, e.g. what
`../shared/tools/upstream_tree.py OUT` writes to `OUT/upstream`). The script
runs that notebook's code cells as they are, with `num_steps = N`, on one CPU
device, and writes device 0's `pos_rewards`, `meta_grad_norm` and
`meta_up_norm` per meta-step, with the versions it ran on. These are the
settings of `tests/test_jobs_meta.py`'s upstream test, whose
`MetaTrainConfig` defaults are the notebook's.

Nothing of the upstream is copied into this repository: the notebook runs from
a temporary copy of UPSTREAM_DIR, changed only where the upstream cannot run
on current JAX: its `isinstance(x, chex.Array)` checks (chex.Array is no
longer a class) become `x is not None`, so the meta-RNN state still
multiplies the features when it has a shape, as `golden/README.md` describes.
The notebook's own code needs one shim: `jax.device_put_replicated`, which JAX
has removed, is put back as copies of its argument stacked along a leading
device axis. Its shell lines (pip, wget) and plotting cells are skipped, and
it reads the Disco103 weights (only to check that the random rule has their
shapes) from --weights (default: $DISCO_RL_WEIGHTS) instead of /content/.
It needs the upstream's dependencies: this project's, and immutabledict.
"""

import argparse
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile

# One CPU device, whatever the caller's environment says.
os.environ['JAX_PLATFORMS'] = 'cpu'
os.environ.pop('XLA_FLAGS', None)

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / 'tests' / 'data' / 'upstream_meta_train_steps.json'
RECORDED = ('pos_rewards', 'meta_grad_norm', 'meta_up_norm')
VERSIONS = (
  'jax',
  'jaxlib',
  'dm-haiku',
  'optax',
  'rlax',
  'distrax',
  'chex',
  'numpy',
)
_ARRAY_CHECK = re.compile(r'isinstance\((\w+), chex\.Array\)')


def patched_copy(upstream: pathlib.Path, into: pathlib.Path) -> pathlib.Path:
  """Copies `upstream/disco_rl` under `into`, with the chex.Array checks
  replaced; returns the folder to put on sys.path."""
  shutil.copytree(upstream / 'disco_rl', into / 'disco_rl')
  path = into / 'disco_rl' / 'networks' / 'meta_nets.py'
  source, count = _ARRAY_CHECK.subn(r'(\1 is not None)', path.read_text())
  if count != 2:
    raise SystemExit(
      f'expected 2 chex.Array checks in {path}, found {count}; '
      'is this the upstream tree?'
    )
  path.write_text(source)
  return into


def notebook_code(
  upstream: pathlib.Path, num_steps: int, weights: pathlib.Path
) -> str:
  """The notebook's code cells to run: no shell lines, no plots; `num_steps`
  and the weights' folder replaced."""
  notebook = json.loads((upstream / 'colabs' / 'meta_train.ipynb').read_text())
  cells = []
  for cell in notebook['cells']:
    if cell['cell_type'] != 'code':
      continue
    source = ''.join(cell['source'])
    if 'pd.DataFrame' in source or 'sns.' in source:
      continue
    cells.append(
      '\n'.join(
        line
        for line in source.splitlines()
        if not line.lstrip().startswith('!')
      )
    )
  code = '\n\n'.join(cells)
  code, count = re.subn(
    r'^num_steps = \d+$', f'num_steps = {num_steps}', code, flags=re.M
  )
  if count != 1:
    raise SystemExit('the notebook does not set num_steps once')
  if weights.name != 'disco_103.npz':
    raise SystemExit(f'--weights must name a disco_103.npz, got {weights}')
  code, count = re.subn(r'/content/', f'{weights.parent}/', code)
  if count != 1:
    raise SystemExit('the notebook does not read its weights from /content/')
  # The notebook imports seaborn and pandas for its plots only.
  return re.sub(r'^import (seaborn|pandas)\b.*$', '', code, flags=re.M)


def _device_put_replicated(tree, devices):
  """What the removed `jax.device_put_replicated` did: one copy per device,
  stacked along a new leading axis sharded over `devices`."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  mesh = jax.sharding.Mesh(np.asarray(devices), ('devices',))
  sharding = jax.sharding.NamedSharding(
    mesh, jax.sharding.PartitionSpec('devices')
  )
  return jax.device_put(
    jax.tree.map(lambda x: np.stack([np.asarray(x)] * len(devices)), tree),
    sharding,
  )


def run(upstream: pathlib.Path, num_steps: int, weights: pathlib.Path) -> dict:
  if importlib.util.find_spec('immutabledict') is None:
    raise SystemExit(
      'the upstream needs immutabledict: pip install immutabledict'
    )
  with tempfile.TemporaryDirectory() as tmp:
    root = patched_copy(upstream, pathlib.Path(tmp))
    sys.path.insert(0, str(root))
    import jax  # pylint: disable=g-import-not-at-top

    jax.device_put_replicated = _device_put_replicated
    namespace = {'__name__': '__upstream_notebook__'}
    code = notebook_code(upstream, num_steps, weights)
    # pylint: disable-next=exec-used
    exec(compile(code, 'meta_train.ipynb', 'exec'), namespace)
    stray = sorted(
      name
      for name, module in sys.modules.items()
      if name.split('.')[0] == 'disco_rl'
      and not str(getattr(module, '__file__', '') or '').startswith(tmp)
    )
    if stray:
      raise SystemExit(f'modules loaded from outside the upstream: {stray}')
  meta_log = namespace['meta_log']
  assert len(jax.devices()) == 1, jax.devices()
  return {
    key: [float(meta_log[step][key]) for step in range(num_steps)]
    for key in RECORDED
  }


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument(
    'upstream',
    type=pathlib.Path,
    help='unpacked upstream (holds disco_rl/ and colabs/)',
  )
  parser.add_argument(
    '--steps',
    type=int,
    default=3,
    help='meta-steps to record (default: %(default)s)',
  )
  parser.add_argument(
    '--weights',
    type=pathlib.Path,
    default=os.environ.get('DISCO_RL_WEIGHTS'),
    help='disco_103.npz (default: $DISCO_RL_WEIGHTS)',
  )
  parser.add_argument('--out', type=pathlib.Path, default=DEFAULT_OUT)
  args = parser.parse_args(argv)
  if args.weights is None:
    parser.error('give --weights or set DISCO_RL_WEIGHTS')
  values = run(args.upstream.resolve(), args.steps, args.weights.resolve())
  versions = {name: importlib.metadata.version(name) for name in VERSIONS}
  record = {
    'description': (
      f'First {args.steps} meta-steps of the upstream '
      'colabs/meta_train.ipynb, recorded by '
      'tests/record_upstream_meta_steps.py: the notebook run as it is '
      '(its chex.Array checks made to run on current JAX, the removed '
      'jax.device_put_replicated put back, shell lines and plots '
      'skipped) with its default '
      'settings: Catch 5x5, 2 agents, 32 environments, rollout 16, 2 '
      'inner steps, a random rule from jax.random.PRNGKey(1), agents and '
      'steps from jax.random.PRNGKey(4), Adam 5e-4; one CPU device. '
      "Values are device 0's meta_log per step."
    ),
    'num_steps': args.steps,
    'versions': versions,
    **values,
  }
  args.out.write_text(json.dumps(record, indent=1) + '\n')
  print(f'{args.out}: {args.steps} steps on jax {versions["jax"]}')
  for key in RECORDED:
    print(f'  {key}: {values[key]}')


if __name__ == '__main__':
  main()
