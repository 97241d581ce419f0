# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Debug checks of acted rollouts: the first bad entry, as plain arrays.

Used by the loops on every acted rollout and by `Agent(debug_checks=True)`
(`agent.check_rollout_values`) on the rollouts it learns from.

An environment bug (an action out of range, a reward that is not finite)
would otherwise flow silently into the parameters. Inside the compiled
program `find_fault` locates the first bad entry of a rollout as plain
arrays (a `Fault`), `first_over_devices` picks the first device that has
one, and the loop returns it next to its metrics; on the host
`raise_if_faulty` raises a `RolloutError` naming the field, the time step,
the environment (batch index over all devices) and the loop step:

  rollout.rewards[t=1, b=1] = nan is not finite (loop step 0)

Plain outputs rather than `jax.experimental.checkify`: any environment can
be checked (checkify refuses batched while-loops, which some gymnax steps
have), and a program traced again is the same program (checkify numbers its
errors per process, which defeats the persistent compilation cache).
"""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np

NO_FAULT, BAD_ACTION, BAD_REWARD, BAD_LOGITS = 0, 1, 2, 3
# The metrics key of a loop step's `Fault` (popped on the host).
KEY = 'rollout_fault'


class RolloutError(ValueError):
  """An acted rollout failed the debug checks (an environment's bug)."""


@chex.dataclass
class Fault:
  """The first bad entry of a checked rollout; all [] (or [K] per step).

  Attributes:
    kind: int32, NO_FAULT, BAD_LOGITS (checked first: the agent's policy
      logits are not finite, so its learning diverged), BAD_ACTION or
      BAD_REWARD.
    t: int32, its time step.
    b: int32, its batch index.
    value: float32, the bad value.
    step: int32, the loop step that acted the rollout.
    limit: int32, the number of actions (valid actions are below it).
    source: int32, who acted it (the agent of a population; 0 otherwise).
  """

  kind: chex.Array
  t: chex.Array
  b: chex.Array
  value: chex.Array
  step: chex.Array
  limit: chex.Array
  source: chex.Array


def find_fault(
  actions_t: chex.Array,
  rewards_t: chex.Array,
  num_actions: int,
  step: chex.Array,
  source: chex.Array | int = 0,
  logits_t: chex.Array | None = None,
) -> Fault:
  """The first bad entry of [T, B] actions and rewards (traceable).

  Args:
    actions_t: [T, B] integer actions, valid in [0, num_actions).
    rewards_t: [T, B] rewards, valid when finite.
    num_actions: the number of actions.
    step: [] the loop step that acted the rollout.
    source: [] who acted it (e.g. the agent's index in a population).
    logits_t: [T, B, A] the behaviour policy's logits (None: not checked),
      valid when finite; non-finite logits mean the agent diverged, and
      then its actions are meaningless, so they are checked first.

  Returns:
    The first (row-major) non-finite logit's entry if any, else the first
    out-of-range action, else the first non-finite reward, else a `Fault`
    of kind NO_FAULT.
  """
  chex.assert_rank([actions_t, rewards_t], 2)
  chex.assert_equal_shape([actions_t, rewards_t])
  width = actions_t.shape[1]
  candidates = []  # (kind, [T, B] bad, [T, B] value), in order.
  if logits_t is not None:
    chex.assert_rank(logits_t, 3)
    chex.assert_equal_shape_prefix([logits_t, actions_t], 2)
    finite = jnp.isfinite(logits_t)
    # The first non-finite logit of each entry (any one if all are finite).
    first = jnp.take_along_axis(
      logits_t, jnp.argmin(finite, axis=-1)[..., None], axis=-1
    )[..., 0]
    candidates.append((BAD_LOGITS, ~jnp.all(finite, axis=-1), first))
  candidates.append(
    (BAD_ACTION, (actions_t < 0) | (actions_t >= num_actions), actions_t)
  )
  candidates.append((BAD_REWARD, ~jnp.isfinite(rewards_t), rewards_t))
  kind = jnp.asarray(NO_FAULT, jnp.int32)
  bad = jnp.zeros(actions_t.shape, bool)
  value = jnp.zeros(actions_t.shape, jnp.float32)
  for this_kind, this_bad, this_value in reversed(candidates):
    found = jnp.any(this_bad)
    kind = jnp.where(found, this_kind, kind)
    bad = jnp.where(found, this_bad, bad)
    value = jnp.where(found, this_value.astype(jnp.float32), value)
  index = jnp.argmax(bad.reshape(-1))
  t, b = jnp.divmod(index, width)
  return Fault(
    kind=kind.astype(jnp.int32),
    t=t.astype(jnp.int32),
    b=b.astype(jnp.int32),
    value=value.reshape(-1)[index],
    step=jnp.asarray(step, jnp.int32),
    limit=jnp.asarray(num_actions, jnp.int32),
    source=jnp.asarray(source, jnp.int32),
  )


def first_of(faults: Fault) -> Fault:
  """The first fault of a [N] stack of faults (in order), traceable."""
  index = jnp.argmax(faults.kind > NO_FAULT)
  return jax.tree.map(lambda x: x[index], faults)


def first_over_devices(
  fault: Fault, axis_name: str, batch_per_device: int
) -> Fault:
  """The fault of the first device that has one, on every device.

  Inside `shard_map`/`pmap` over `axis_name`; batch indices become indices
  over all devices (device d's entry b is `d * batch_per_device + b`).
  """
  device = jax.lax.axis_index(axis_name)
  has = fault.kind > NO_FAULT
  first = jax.lax.pmin(
    jnp.where(has, device, jnp.iinfo(jnp.int32).max), axis_name
  )
  mine = has & (device == first)
  fault = dataclasses.replace(fault, b=fault.b + device * batch_per_device)
  return jax.tree.map(
    lambda x: jax.lax.psum(jnp.where(mine, x, jnp.zeros_like(x)), axis_name),
    fault,
  )


def message(fault: Fault, what: str = 'rollout') -> str:
  """The error message of one fault (host values).

  `what` names the rollout; '{source}' in it becomes `fault.source`.
  """
  kind, t, b, step, limit, source = (
    int(np.asarray(x))
    for x in (
      fault.kind,
      fault.t,
      fault.b,
      fault.step,
      fault.limit,
      fault.source,
    )
  )
  value = float(np.asarray(fault.value))
  what = what.format(source=source)
  if kind == BAD_LOGITS:
    return (
      f'{what}.logits[t={t}, b={b}] = {value} is not finite (loop step '
      f"{step}): the agent's outputs are not finite, its learning "
      'diverged (try a smaller learning rate)'
    )
  if kind == BAD_ACTION:
    return (
      f'{what}.actions[t={t}, b={b}] = {int(value)} is outside '
      f'[0, {limit}) (loop step {step})'
    )
  return (
    f'{what}.rewards[t={t}, b={b}] = {value} is not finite (loop step {step})'
  )


def first_index(faults: Fault | None) -> int | None:
  """The index of the first faulty step of [K] host faults (None: none)."""
  if faults is None:
    return None
  bad = np.flatnonzero(np.asarray(faults.kind).reshape(-1) > NO_FAULT)
  return int(bad[0]) if bad.size else None


def raise_if_faulty(faults: Fault | None, what: str = 'rollout') -> None:
  """Raises RolloutError for the first fault of [K] steps' faults, if any.

  Args:
    faults: host (NumPy) faults with a leading step axis, or None (the
      checks are off).
    what: the rollout's name in the message (see `message`).
  """
  if faults is None:
    return
  kinds = np.asarray(faults.kind).reshape(-1)
  bad = np.flatnonzero(kinds > NO_FAULT)
  if bad.size:
    one = jax.tree.map(lambda x: np.asarray(x).reshape(-1)[bad[0]], faults)
    raise RolloutError('debug check failed: ' + message(one, what))
