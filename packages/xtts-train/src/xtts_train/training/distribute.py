"""`--strategy`: which `tf.distribute` strategy runs the step, and each replica's share.

- `one-device`: TensorFlow's default strategy; the whole step is one XLA program.
- `mirrored`: `tf.distribute.MirroredStrategy` over the local GPUs (or the logical CPU
  devices, when there is no GPU). Every global batch of a `DatasetSpec` shape is split
  along the batch dimension into equal static per-replica slices.
- `multi-worker`: `tf.distribute.MultiWorkerMirroredStrategy`, with the cluster in the
  `TF_CONFIG` environment variable (see the README); each worker reads its own shuffle of
  the data and splits its batches over its local devices.
- `auto`: `mirrored` when more than one GPU is visible, else `one-device`.

XLA compiles one program per device, so with several replicas the gradient computation of
each replica is the XLA program, and the all-reduce and the update around it run in a
(non-XLA) `tf.function` with the same static input signature.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import tensorflow as tf

from xtts_train.config import STRATEGIES
from xtts_train.errors import ConfigError, XttsTrainError

__all__ = [
    "STRATEGIES",
    "common_step",
    "is_multi_worker",
    "local_replicas",
    "lost_peer_error",
    "make_strategy",
    "replica_slice",
    "worker_index",
]

# What a collective raises when a peer is gone: a reset connection at once, TensorFlow's
# health check (every 30 s, 3 tries of 10 s) for a peer that stops answering.
PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
               tf.errors.CancelledError)  # fmt: skip


def make_strategy(name: str) -> tf.distribute.Strategy | None:
    """The strategy called `name` (one of `STRATEGIES`); `None` for one device.

    Call it before other TensorFlow work: multi-worker collectives are configured when
    the strategy is created.
    """
    if name not in STRATEGIES:
        raise ConfigError(f"strategy: expected one of {STRATEGIES}, received: strategy={name!r}")
    if name == "multi-worker":  # before anything starts TensorFlow's runtime
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "auto":  # physical devices: listing them does not start the runtime
        name = "mirrored" if len(tf.config.list_physical_devices("GPU")) > 1 else "one-device"
    if name == "one-device":
        return None
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in gpus or tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices)


def _check_tf_config() -> None:
    """A malformed TF_CONFIG fails here with a message, not deep inside TensorFlow."""
    raw = os.environ.get("TF_CONFIG")
    if raw is None:
        return  # a single worker: its local devices
    try:
        config = json.loads(raw)
        workers, index = config["cluster"]["worker"], int(config["task"]["index"])
        if not 0 <= index < len(workers):
            raise ValueError(f"task index {index} is not one of the {len(workers)} workers")
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(
            'TF_CONFIG: expected JSON like {"cluster": {"worker": ["host:port", ...]}, '
            f'"task": {{"type": "worker", "index": 0}}}}, received: TF_CONFIG={raw!r} ({error})'
        ) from None


def worker_index(strategy: tf.distribute.Strategy | None) -> int:
    """This process's task index in a multi-worker cluster (0 otherwise: the chief)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    return int(resolver.task_id or 0) if resolver is not None and resolver.task_type else 0


def is_multi_worker(strategy: tf.distribute.Strategy | None) -> bool:
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def common_step(strategy: tf.distribute.Strategy | None, step: int) -> int:
    """The smallest of every worker's `step`: the newest checkpoint all of them hold.

    A worker killed between its peers' checkpoint and its own is one checkpoint behind
    them; resuming each from its own newest would pair different steps in every
    all-reduce. Not multi-worker: `step` itself.
    """
    if not is_multi_worker(strategy):
        return step
    values = strategy.experimental_distribute_values_from_function(
        lambda _: tf.constant([step], tf.int64)
    )
    return int(tf.reduce_min(strategy.gather(values, axis=0)))


def lost_peer_error(error: tf.errors.OpError, worker: int, step: int) -> XttsTrainError:
    """The one-line error of a worker whose cluster lost a peer (`step`: the checkpoint
    the pair resumes from)."""
    first = error.message.strip().splitlines()[0]
    return XttsTrainError(
        f"worker {worker} lost contact with the cluster ({first}); training cannot go on "
        f"with a worker missing: start every worker again with the same command, and they "
        f"resume from their last common checkpoint (this worker's newest: step {step})"
    )


def local_replicas(strategy: tf.distribute.Strategy) -> int:
    """Replicas fed by this process: a global batch is split among them."""
    return len(strategy.extended.worker_devices)


def replica_slice(batch: Mapping[str, tf.Tensor], replicas: int) -> dict[str, tf.Tensor]:
    """This replica's share of `batch`, inside `strategy.run`: rows [i*B/R, (i+1)*B/R).

    The slice size is a Python int, so every per-replica tensor keeps a static shape.
    """
    context = tf.distribute.get_replica_context()
    index = context.replica_id_in_sync_group % replicas  # global id -> this worker's device
    size = int(next(iter(batch.values())).shape[0]) // replicas  # every field leads with B
    sliced = {}
    for name, value in batch.items():
        begin = tf.stack([index * size] + [0] * (value.shape.rank - 1))
        sliced[name] = tf.slice(value, begin, [size, *value.shape[1:]])
    return sliced
