"""GPU utilization sampled through NVML while training runs (when there is a GPU).

NVML's utilization counter is the fraction of the last sample period in which a kernel
was running: the number that shows a starved GPU. A daemon thread reads it every
`interval` seconds for each visible GPU; nothing touches the training thread.
"""

from __future__ import annotations

import importlib
import logging
import statistics
import threading

import tensorflow as tf

__all__ = ["GpuMonitor"]

logger = logging.getLogger(__name__)


class GpuMonitor:
    """Samples NVML utilization of the visible GPUs between `start()` and `stop()`.

    Attributes:
        note: why utilization is not available (no GPU, no NVML), or `None` when sampled.
    """

    def __init__(self, interval: float = 0.5, nvml=None) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self.note: str | None = None
        self._nvml, self._handles = None, []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus and nvml is None:
            self.note = "not available: no GPU (utilization is sampled through NVML on GPUs)"
            return
        try:
            self._nvml = nvml or importlib.import_module("pynvml")
            self._nvml.nvmlInit()
            count = self._nvml.nvmlDeviceGetCount()
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as error:  # any NVML failure only loses the figure
            self._nvml = None
            self.note = (
                f"not available: NVML failed ({error}); install nvidia-ml-py "
                f"(pip install 'xtts-train[gpu]')"
            )

    def start(self) -> None:
        if self._nvml is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpu-monitor", daemon=True)
            self._thread.start()

    def stop(self) -> float | None:
        """Stop sampling; the mean utilization in [0, 1] over all GPUs and samples."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self.utilization

    @property
    def utilization(self) -> float | None:
        return statistics.fmean(self.samples) if self.samples else None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                rates = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
            except Exception as error:  # stop sampling, keep training
                logger.warning("NVML sampling stopped: %s", error)
                return
            self.samples.extend(rate / 100.0 for rate in rates)
