"""The server's Prometheus metrics (`GET /metrics`), in a registry of its own.

- `xtts_serve_requests_total{route, status}`: requests answered, by route template (so
  voice ids do not become labels) and HTTP status.
- `xtts_serve_queue_depth`, `xtts_serve_slots_busy`, `xtts_serve_ready`: requests
  waiting for the decoder; requests being decoded (a slot each); 1 once the warm-up is done.
- `xtts_serve_time_to_first_audio_seconds`: request received -> its first audio ready
  to send (a stream's first chunk; the whole audio otherwise).
- `xtts_serve_real_time_factor`: seconds of audio per second a request was decoding
  (admitted to finished), per request (above 1: faster than real time); the rate of
  `xtts_serve_audio_seconds_total` is the aggregate; `xtts_serve_decode_seconds_total` sums
  each request's decoding time, which overlap in the slots.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from xtts_serve.worker import DecodeWorker

__all__ = ["CONTENT_TYPE", "ServeMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
_FIRST_AUDIO = (0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_REAL_TIME = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


class ServeMetrics:
    """The metrics of one app, the queue's read from `worker` when scraped."""

    def __init__(self, worker: DecodeWorker) -> None:
        self.registry = registry = CollectorRegistry()
        self.requests = Counter("xtts_serve_requests", "HTTP requests answered",
                                ["route", "status"], registry=registry)  # fmt: skip
        depth = Gauge("xtts_serve_queue_depth", "Requests waiting for the decoder",
                      registry=registry)  # fmt: skip
        depth.set_function(lambda: worker.depth)
        busy = Gauge("xtts_serve_slots_busy", "Requests being decoded, a decoder slot each",
                     registry=registry)  # fmt: skip
        busy.set_function(lambda: worker.busy)
        ready = Gauge("xtts_serve_ready", "1 once every program is compiled", registry=registry)
        ready.set_function(lambda: float(worker.ready))
        self.first_audio = Histogram(
            "xtts_serve_time_to_first_audio_seconds",
            "Request received to its first audio ready to send", buckets=_FIRST_AUDIO,
            registry=registry,
        )  # fmt: skip
        self.real_time = Histogram(
            "xtts_serve_real_time_factor", "Seconds of audio per second of decoding",
            buckets=_REAL_TIME, registry=registry,
        )  # fmt: skip
        self.audio_seconds = Counter("xtts_serve_audio_seconds", "Seconds of audio spoken",
                                     registry=registry)  # fmt: skip
        self.decode_seconds = Counter("xtts_serve_decode_seconds",
                                      "Seconds the decoder worked on requests",
                                      registry=registry)  # fmt: skip

    def spoken(self, *, audio_seconds: float, decode_seconds: float) -> None:
        """A request's audio is all decoded."""
        self.audio_seconds.inc(audio_seconds)
        self.decode_seconds.inc(decode_seconds)
        if decode_seconds > 0:
            self.real_time.observe(audio_seconds / decode_seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
