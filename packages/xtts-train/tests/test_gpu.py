"""GPU utilization through NVML: averaged samples when there is a GPU, a reason when not."""

from __future__ import annotations

import time
from types import SimpleNamespace

import tensorflow as tf

from xtts_train.training.gpu import GpuMonitor


def fake_nvml(fail: bool = False) -> SimpleNamespace:
    """NVML's calls, for two GPUs busy 40% and 80% of the time (or a missing library)."""

    def init():
        if fail:
            raise RuntimeError("NVML Shared Library Not Found")

    return SimpleNamespace(
        nvmlInit=init,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetUtilizationRates=lambda handle: SimpleNamespace(gpu=(40, 80)[handle]),
    )


def test_utilization_is_the_mean_of_the_samples():
    monitor = GpuMonitor(interval=0.01, nvml=fake_nvml())
    monitor.start()
    time.sleep(0.2)
    utilization = monitor.stop()
    assert monitor.note is None
    assert len(monitor.samples) >= 4
    assert abs(utilization - 0.6) < 1e-9


def test_without_a_gpu_it_says_why():
    assert not tf.config.list_physical_devices("GPU")  # this suite runs on CPU
    monitor = GpuMonitor(interval=0.01)
    monitor.start()
    assert monitor.stop() is None
    assert "no GPU" in monitor.note


def test_a_failing_nvml_loses_only_the_figure():
    monitor = GpuMonitor(interval=0.01, nvml=fake_nvml(fail=True))
    monitor.start()
    assert monitor.stop() is None
    assert "NVML Shared Library Not Found" in monitor.note
    assert "nvidia-ml-py" in monitor.note
