# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Reads back what a run's live loggers wrote (TensorBoard, W&B offline)."""

import json
import pathlib


def tensorboard_curves(directory) -> dict[str, dict[int, float]]:
  """{tag: {step: value}} of the event files in `directory`."""
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top

  curves = {}
  for events in sorted(pathlib.Path(directory).glob('events.out.*')):
    accumulator = event_accumulator.EventAccumulator(str(events))
    accumulator.Reload()
    for tag in accumulator.Tags()['scalars']:
      curves.setdefault(tag, {}).update(
        {e.step: e.value for e in accumulator.Scalars(tag)}
      )
  return curves


def wandb_history(directory) -> dict[int, dict[str, float]]:
  """{step: {key: value}} of the offline W&B runs in `directory`/wandb.

  A .wandb file is W&B's header (7 bytes) then LevelDB-log records (32 KiB
  blocks; each record a 7-byte header: crc, length, type) holding
  `wandb_internal_pb2.Record` protos."""
  from wandb.proto import wandb_internal_pb2  # pylint: disable=g-import-not-at-top

  history = {}
  for path in sorted(pathlib.Path(directory).glob('wandb/*run-*/run-*.wandb')):
    data, position, pending = path.read_bytes(), 7, b''
    assert data[:4] == b':W&B', path
    while position + 7 <= len(data):
      if 32768 - position % 32768 < 7:  # A block's tail: padding.
        position += 32768 - position % 32768
        continue
      length = int.from_bytes(data[position + 4 : position + 6], 'little')
      kind, chunk = (
        data[position + 6],
        data[position + 7 : position + 7 + length],
      )
      position += 7 + length
      pending = chunk if kind in (1, 2) else pending + chunk
      if kind not in (1, 4):  # Not a whole record yet.
        continue
      record = wandb_internal_pb2.Record()
      record.ParseFromString(pending)
      if record.WhichOneof('record_type') == 'history':
        items = {
          i.key or '/'.join(i.nested_key): json.loads(i.value_json)
          for i in record.history.item
        }
        history[int(items.pop('_step'))] = {
          k: v for k, v in items.items() if not k.startswith('_')
        }
  return history
