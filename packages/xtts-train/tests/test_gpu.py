"""GPU utilization through NVML: averaged samples when there is a GPU, a reason when not."""

from __future__ import annotations

import importlib.util
import time
from types import SimpleNamespace

import tensorflow as tf

from xtts_train.training.gpu import GpuMonitor


def has_nvml() -> bool:
    """Whether NVML's Python binding (nvidia-ml-py, the gpu extra) is installed."""
    return importlib.util.find_spec("pynvml") is not None


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


def test_this_machine_is_sampled_or_the_note_says_why():
    # The default environment (tensorflow-cpu) has no GPU; `hatch run cuda:test` may have
    # one, sampled through NVML where the gpu extra (nvidia-ml-py) is installed.
    gpu = bool(tf.config.list_physical_devices("GPU"))
    monitor = GpuMonitor(interval=0.01)
    monitor.start()
    deadline = time.monotonic() + 10
    while gpu and has_nvml() and not monitor.samples and time.monotonic() < deadline:
        time.sleep(0.01)  # a first sample (a generous deadline, not a timing check)
    utilization = monitor.stop()
    if not gpu:
        assert utilization is None
        assert "no GPU" in monitor.note
    elif not has_nvml():
        assert utilization is None
        assert "NVML failed" in monitor.note
        assert "nvidia-ml-py" in monitor.note
    else:
        assert monitor.note is None
        assert monitor.samples
        assert 0 <= utilization <= 1


def test_a_failing_nvml_loses_only_the_figure():
    monitor = GpuMonitor(interval=0.01, nvml=fake_nvml(fail=True))
    monitor.start()
    assert monitor.stop() is None
    assert "NVML Shared Library Not Found" in monitor.note
    assert "nvidia-ml-py" in monitor.note
