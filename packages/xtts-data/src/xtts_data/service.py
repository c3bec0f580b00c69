"""Distributed preprocessing on TensorFlow's tf.data service (no engine of our own).

Start one dispatcher and any number of workers (`xtts-data serve dispatcher|worker`),
then set `DataConfig.service` to the dispatcher's address: `make_dataset` sends reading,
parsing (or on-the-fly decoding and mel computation), filtering and shuffling to the
workers, each utterance of an epoch to exactly one of them (dynamic sharding); the
trainer's process pairs and batches what arrives.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["start_dispatcher", "start_worker"]

_service = tf.data.experimental.service


def start_dispatcher(*, port: int = 0, work_dir: str | None = None) -> _service.DispatchServer:
    """Start a dispatcher on `port` (0 picks a free one); its address is `server.target`.

    Args:
        port: TCP port to listen on.
        work_dir: where the dispatcher journals its state, so a restarted dispatcher
            resumes the jobs (fault-tolerant mode); `None` keeps state in memory.
    """
    config = _service.DispatcherConfig(
        port=port, work_dir=work_dir, fault_tolerant_mode=work_dir is not None
    )
    return _service.DispatchServer(config)


def start_worker(
    dispatcher: str, *, port: int = 0, address: str | None = None
) -> _service.WorkerServer:
    """Start a worker that registers with `dispatcher` (`grpc://host:port` or `host:port`).

    Args:
        dispatcher: the dispatcher's address.
        port: TCP port for the worker (0 picks a free one).
        address: how the dispatcher reaches this worker (`host:%port%`), when it is not
            `localhost`.
    """
    dispatcher = dispatcher.removeprefix("grpc://")
    config = _service.WorkerConfig(dispatcher_address=dispatcher, port=port, worker_address=address)
    return _service.WorkerServer(config)
