"""`train.compiler`: the per-device, per-role choice between XLA and the graph executor."""

from __future__ import annotations

import pytest
import tensorflow as tf

from xtts_train.compile.compiler import AUTO, ROLES, choices, device_kind, resolve
from xtts_train.config import COMPILERS
from xtts_train.tasks.registry import TASKS
from xtts_train.tasks.vocoder import VocoderTask


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("compiler", ["xla", "graph"])
def test_an_explicit_compiler_wins_on_every_device(compiler, role):
    for device in AUTO:
        assert resolve(compiler, role, device) == compiler


def test_auto_trains_on_the_graph_executor_on_a_cpu_and_uses_xla_elsewhere():
    assert [resolve("auto", role, "CPU") for role in ROLES] == ["graph", "graph", "xla"]
    assert {resolve("auto", role, "GPU") for role in ROLES} == {"xla"}
    assert set(AUTO) == {"CPU", "GPU", "TPU"}
    assert all(set(table) == set(ROLES) for table in AUTO.values())
    assert all(set(table.values()) <= set(COMPILERS) for table in AUTO.values())


def test_auto_runs_the_vocoder_under_xla_on_a_cpu():
    table = VocoderTask.compilers  # the task's own measurements, over AUTO's
    assert {resolve("auto", role, "CPU", table=table) for role in ROLES} == {"xla"}
    assert resolve("auto", "train", "GPU", table=table) == "xla"  # where it names no device
    assert resolve("graph", "train", "CPU", table=table) == "graph"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_table_names_known_devices_and_every_role(name):
    for device, roles in TASKS[name].compilers.items():
        assert device in AUTO
        assert set(roles) == set(ROLES)
        assert set(roles.values()) <= {"xla", "graph"}


def test_this_process_device_and_the_choices_reported():
    kind = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    assert device_kind() == kind
    report = choices("auto")
    assert report == {"setting": "auto", "device": kind, **AUTO[kind]}
    assert choices("xla") == {"setting": "xla", "device": kind, **dict.fromkeys(ROLES, "xla")}


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("jit", "train"), r"^Expected compiler one of \('auto', 'xla', 'graph'\), received: compiler='jit'$"),
        (("auto", "infer"), r"^Expected role one of \('train', 'eval', 'decode'\), received: role='infer'$"),
        (("auto", "train", "NPU"), r"^Expected device one of \['CPU', 'GPU', 'TPU'\], received: device='NPU'$"),
    ],
)  # fmt: skip
def test_bad_arguments_say_what_was_expected(args, match):
    with pytest.raises(ValueError, match=match):
        resolve(*args)
