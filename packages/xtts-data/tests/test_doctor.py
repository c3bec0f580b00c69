"""doctor: Python ops in a dataset graph, timings, device utilization, verdict and plot.

The pipelines are built by hand from constant batches matching a hand-made `DatasetSpec`
(or `SegmentSpec`), so no cache is needed and the padding efficiency is known exactly.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
import tensorflow as tf
from data_helpers import REPORT_KEYS

from xtts_data import doctor
from xtts_data.buckets import BatchShape
from xtts_data.doctor import DoctorReport, diagnose, plot, python_ops, time_batches, verdict
from xtts_data.pipeline import DataPipeline, DatasetSpec
from xtts_data.segments import SegmentPipeline, SegmentShape, SegmentSpec

SPEC = DatasetSpec(
    shapes=(BatchShape(frames=16, text_len=8, batch_size=4), BatchShape(frames=32, text_len=12, batch_size=4)),
    n_mels=8,
    cond_frames=4,
)  # fmt: skip
# Real mel frames per batch: 40 of 64 and 80 of 128, so every batch is 62.5% real.
MEL_LENGTHS = {16: [16, 12, 8, 4], 32: [32, 24, 16, 8]}
EFFICIENCY = 0.625
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def make_batch(shape: BatchShape) -> dict[str, tf.Tensor]:
    b, t, f = shape.batch_size, shape.text_len, shape.frames
    m, c = SPEC.n_mels, SPEC.cond_frames
    lengths = tf.constant(MEL_LENGTHS[f], tf.int32)
    steps = tf.range(f)[None, :]
    return {
        "tokens": tf.ones([b, t], tf.int32),
        "token_lengths": tf.fill([b], t),
        "token_mask": tf.ones([b, t]),
        "mel": tf.zeros([b, f, m]),
        "mel_lengths": lengths,
        "mel_mask": tf.cast(steps < lengths[:, None], tf.float32),
        "stop_targets": tf.cast(steps >= lengths[:, None] - 1, tf.float32),
        "speaker": tf.zeros([b], tf.int32),
        "cond_mel": tf.zeros([b, c, m]),
        "cond_lengths": tf.fill([b], c),
    }


def batches() -> tf.data.Dataset:
    """One batch of each spec shape, alternating."""
    first, *rest = [tf.data.Dataset.from_tensors(make_batch(s)) for s in SPEC.shapes]
    for ds in rest:
        first = first.concatenate(ds)
    return first


def pipeline(dataset: tf.data.Dataset, tmp_path) -> DataPipeline:
    return DataPipeline(
        dataset=dataset,
        spec=SPEC,
        split="all",
        num_samples=8,
        filtered=0,
        batches_per_epoch=2,
        padding_efficiency=EFFICIENCY,
        source=tmp_path,
    )


def sleepy(ms: float):
    """A map function that holds each batch `ms` milliseconds in a numpy_function."""

    def wait(x):
        time.sleep(ms / 1e3)
        return x

    def fn(batch):
        batch = dict(batch)
        lengths = tf.numpy_function(wait, [batch["mel_lengths"]], tf.int32)
        batch["mel_lengths"] = tf.ensure_shape(lengths, batch["mel_lengths"].shape)
        return batch

    return fn


def test_hand_made_batches_match_the_spec():
    assert [SPEC.matches(make_batch(s)) for s in SPEC.shapes] == list(SPEC.shapes)


# --- python_ops ----------------------------------------------------------------------


def with_numpy_function(batch):
    speaker = tf.numpy_function(lambda x: x + 1, [batch["speaker"]], tf.int32)
    return {**batch, "speaker": speaker}


def with_stateless_numpy_function(batch):
    speaker = tf.numpy_function(lambda x: x + 1, [batch["speaker"]], tf.int32, stateful=False)
    return {**batch, "speaker": speaker}


def with_py_function(batch):
    speaker = tf.py_function(lambda x: x + 1, [batch["speaker"]], tf.int32)
    return {**batch, "speaker": speaker}


def interleaved(fn) -> tf.data.Dataset:
    """`fn` mapped inside the inner dataset of an interleave."""
    return tf.data.Dataset.range(2).interleave(
        lambda i: tf.data.Dataset.from_tensors(make_batch(SPEC.shapes[0])).map(fn),
        cycle_length=2,
    )


@pytest.mark.parametrize(
    "make",
    [
        batches,
        lambda: batches().map(lambda b: {**b, "mel": b["mel"] * 2.0}),
        lambda: batches().filter(lambda b: tf.reduce_sum(b["mel_lengths"]) > 0).prefetch(2),
        lambda: interleaved(lambda b: {**b, "speaker": b["speaker"] + 1}),
    ],
    ids=["constant", "map", "filter", "interleave"],
)
def test_python_ops_finds_nothing_in_a_pure_tf_dataset(make):
    assert python_ops(make()) == []


@pytest.mark.parametrize(
    ("make", "op"),
    [
        (lambda: batches().map(with_numpy_function), "PyFunc"),
        (lambda: batches().map(with_stateless_numpy_function), "PyFuncStateless"),
        (lambda: batches().map(with_py_function), "EagerPyFunc"),
        (lambda: batches().filter(lambda b: tf.numpy_function(lambda: True, [], tf.bool)), "PyFunc"),
        (lambda: interleaved(with_numpy_function), "PyFunc"),
        (lambda: interleaved(with_py_function), "EagerPyFunc"),
    ],
    ids=["map-numpy", "map-numpy-stateless", "map-py", "filter-numpy", "interleave-numpy", "interleave-py"],
)  # fmt: skip
def test_python_ops_finds_nested_python_calls(make, op):
    found = python_ops(make())
    assert len(found) == 1, found
    assert found[0].endswith(f" ({op})")


# --- diagnose ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fast_report(tmp_path_factory) -> DoctorReport:
    """A fast pipeline, timed alone and with a 20 ms simulated device step."""
    return diagnose(
        pipeline(batches(), tmp_path_factory.mktemp("doctor")), batches=20, device_ms=20
    )


def test_report_has_the_documented_numbers(fast_report):
    report = fast_report.to_dict()
    assert set(report) >= REPORT_KEYS
    assert report["padding_efficiency"] == EFFICIENCY
    assert report["batches"] == 20
    assert report["samples_per_s"] > 0
    assert 0 <= report["batch_ms_mean"] <= report["batch_ms_p99"]
    assert report["batch_ms_cv"] >= 0
    spec_shapes = [[s.batch_size, s.text_len, s.frames] for s in SPEC.shapes]
    assert report["shapes"] == spec_shapes  # both alternating shapes, as [batch, text, frames]
    assert report["shapes_outside_spec"] == []
    assert report["python_ops"] == []


def test_the_device_figures_agree_with_its_timeline(fast_report):
    # How busy the device was depends on this machine's load (the fake clock below checks
    # the figure itself); its figures agree with its timeline whatever the load.
    report, device, step = fast_report.to_dict(), fast_report.device, 20 / 1e3
    assert report["device_ms"] == 20
    assert len(device.device_starts) == 20
    assert device.busy == pytest.approx(20 * step)
    assert np.all(np.diff(device.device_starts) >= step - 1e-9)  # one step at a time
    assert device.span == pytest.approx(device.device_starts[-1] - device.device_starts[0] + step)
    assert 0 < report["device_utilization"] <= 1
    assert report["device_utilization"] == pytest.approx(min(device.busy / device.span, 1.0))
    assert report["device_wait_ms_mean"] >= 0
    assert report["device_wait_ms_p99"] >= 0
    busy = report["device_utilization"] >= 0.95
    assert report["verdict"].startswith("not input-bound" if busy else "input-bound: ")


class FakeClock:
    """`doctor`'s `time`: moves only when a batch is made or the host sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def process_time(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def arriving_every(clock: FakeClock, seconds: float):
    """The spec's batches, alternating, each `seconds` on `clock` in the making."""
    made = [make_batch(s) for s in SPEC.shapes]
    for batch in itertools.cycle(made):
        clock.now += seconds
        yield batch


@pytest.mark.parametrize(
    ("making_ms", "device_ms", "utilization", "verdict_start"),
    [
        (0, 20, 1.0, "not input-bound: device busy 100.0%"),
        (10, 20, 1.0, "not input-bound: device busy 100.0%"),  # the queue stays full
        (20, 20, 1.0, "not input-bound: device busy 100.0%"),
        # 20 steps of 5 ms over 19 gaps of 30 ms and the last step: 100 / 575 ms.
        (30, 5, 100 / 575, "input-bound: device idle 83% of the time (waits 30.0 ms per 5 ms"),
    ],
)  # fmt: skip
def test_device_utilization_of_a_known_timeline(monkeypatch, making_ms, device_ms, utilization,
                                                verdict_start):  # fmt: skip
    clock = FakeClock()
    monkeypatch.setattr(doctor, "time", clock)
    timing = time_batches(arriving_every(clock, making_ms / 1e3), batches=20, device_ms=device_ms)
    assert timing.summary()["device_utilization"] == pytest.approx(utilization)
    assert timing.summary()["batch_ms_mean"] == pytest.approx(making_ms)
    spec_shapes = [s.key for s in SPEC.shapes]
    report = DoctorReport(timing, timing, device_ms, [], spec_shapes, startup_s=0.0).to_dict()
    assert report["device_utilization"] == pytest.approx(utilization)
    assert report["verdict"].startswith(verdict_start), report["verdict"]


def test_without_device_utilization_is_none(tmp_path):
    report = diagnose(pipeline(batches(), tmp_path), batches=6, warmup=1).to_dict()
    assert report["device_utilization"] is None
    assert report["padding_efficiency"] == EFFICIENCY
    assert report["verdict"].startswith("pipeline alone: ")
    assert "--device-ms" in report["verdict"]


def test_shapes_outside_the_spec_are_reported(tmp_path):
    odd = BatchShape(frames=16, text_len=8, batch_size=2)  # not in SPEC
    dataset = batches().concatenate(
        tf.data.Dataset.from_tensors(make_batch(SPEC.shapes[0])).map(
            lambda b: {k: v[:2] for k, v in b.items()}
        )
    )
    report = diagnose(pipeline(dataset, tmp_path), batches=6, warmup=0).to_dict()
    assert report["shapes_outside_spec"] == [[odd.batch_size, odd.text_len, odd.frames]]
    assert "1 batch shape(s) outside the spec" in report["verdict"]


def test_slow_python_pipeline_is_input_bound(tmp_path):
    dataset = batches().map(sleepy(30))
    report = diagnose(pipeline(dataset, tmp_path), batches=10, device_ms=5, warmup=2).to_dict()
    assert report["device_utilization"] < 0.5
    assert report["batch_ms_mean"] > 15
    assert len(report["python_ops"]) == 1
    assert report["verdict"].startswith("input-bound")
    assert "Python op(s)" in report["verdict"]


# --- segment pipelines ---------------------------------------------------------------

SEGMENT = SegmentShape(batch_size=4, frames=8, samples=8 * 16)
SEGMENT_SPEC = SegmentSpec(shapes=(SEGMENT,), n_mels=SPEC.n_mels, hop_length=16)


def segment_pipeline(dataset: tf.data.Dataset, tmp_path) -> SegmentPipeline:
    return SegmentPipeline(dataset=dataset, spec=SEGMENT_SPEC, split="all", num_samples=8,
                           filtered=1, batches_per_epoch=2, source=tmp_path)  # fmt: skip


def segment_batches() -> tf.data.Dataset:
    signature = SEGMENT_SPEC.signature(SEGMENT)
    return tf.data.Dataset.from_tensors(
        {name: tf.zeros(spec.shape, spec.dtype) for name, spec in signature.items()}
    ).repeat(2)


def test_segment_pipelines_are_diagnosed_by_their_one_shape(tmp_path):
    report = diagnose(
        segment_pipeline(segment_batches(), tmp_path), batches=8, device_ms=5, warmup=1
    ).to_dict()
    assert set(report) >= REPORT_KEYS
    assert report["shapes"] == report["spec_shapes"] == [[4, 8, 128]]  # (batch, frames, samples)
    assert report["shapes_outside_spec"] == []
    assert report["python_ops"] == []
    assert report["padding_efficiency"] == 1.0  # every frame of a segment is real
    assert report["batches"] == 8
    assert report["samples_per_s"] > 0
    assert 0 < report["device_utilization"] <= 1
    assert "padding" not in report["verdict"]


def test_a_python_segment_cutter_is_named(tmp_path):
    def cut(batch):
        audio = tf.numpy_function(lambda x: x, [batch["audio"]], tf.float32)
        return {**batch, "audio": tf.ensure_shape(audio, batch["audio"].shape)}

    dataset = segment_batches().map(cut)
    report = diagnose(segment_pipeline(dataset, tmp_path), batches=4, warmup=0).to_dict()
    assert len(report["python_ops"]) == 1
    assert report["shapes_outside_spec"] == []
    assert "1 Python op(s)" in report["verdict"]


# --- verdict and plot ----------------------------------------------------------------

BASE = {
    "python_ops": [],
    "shapes_outside_spec": [],
    "padding_efficiency": 0.95,
    "device_utilization": None,
    "samples_per_s": 120.0,
    "batch_ms_mean": 3.3,
}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, "pipeline alone: 120 samples/s, a batch every 3.3 ms; pass --device-ms with your step time to judge it"),
        ({"device_utilization": 0.97, "device_ms": 5.0, "device_wait_ms_mean": 0.1}, "not input-bound: device busy 97.0% of the time"),
        ({"device_utilization": 0.95, "device_ms": 5.0, "device_wait_ms_mean": 0.2}, "not input-bound: device busy 95.0% of the time"),
        ({"device_utilization": 0.4, "device_ms": 5.0, "device_wait_ms_mean": 7.5}, "input-bound: device idle 60% of the time (waits 7.5 ms per 5 ms step)"),
        ({"python_ops": ["a (PyFunc)", "b (EagerPyFunc)"]}, "; 2 Python op(s) in the graph hold the GIL per element"),
        ({"shapes_outside_spec": [[2, 8, 16]]}, "; 1 batch shape(s) outside the spec"),
        ({"padding_efficiency": 0.5}, "; padding wastes 50% of mel frames (try policy: buckets)"),
    ],
)  # fmt: skip
def test_verdict(changes, expected):
    text = verdict({**BASE, **changes})
    assert expected in text
    assert text.startswith(("pipeline alone: ", "not input-bound: ", "input-bound: "))


def test_verdict_lists_every_note_in_order():
    report = {**BASE, "python_ops": ["x (PyFunc)"], "shapes_outside_spec": [[1, 1, 1]]}
    text = verdict({**report, "padding_efficiency": 0.6})
    notes = [
        "1 Python op(s) in the graph hold the GIL per element",
        "1 batch shape(s) outside the spec",
        "padding wastes 40% of mel frames (try policy: buckets)",
    ]
    assert text.endswith("".join(f"; {note}" for note in notes))
    assert text.startswith("pipeline alone: ")


def test_verdict_without_device_has_no_utilization_claim():
    text = verdict(BASE)
    assert "input-bound" not in text
    assert "busy" not in text


@pytest.mark.parametrize("with_device", [False, True], ids=["alone", "with-device"])
def test_plot_writes_a_png(fast_report, tmp_path, with_device):
    report = fast_report
    if not with_device:
        report = DoctorReport(
            report.alone, None, None, report.python_ops, report.spec_shapes, report.startup_s
        )
    path = tmp_path / "doctor.png"
    plot(report, path)
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 1000
    assert np.frombuffer(data[16:24], ">u4").tolist()[0] > 0  # IHDR width
