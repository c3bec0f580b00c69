"""The memory planner (`train.memory_budget_gb`): batch sizes from a bucket's memory line,
the refusal of a budget too small, measured lines from real steps, and `fit`/`check`
training on (and a resume keeping) the planned sizes."""

from __future__ import annotations

import re

import pytest
import yaml
from train_helpers import MICRO, ONE_SHAPE, OVERRIDES, as_cli

import xtts_data as xd
from xtts_data import BatchShape
from xtts_data.plan import FILL, BucketCost, plan_batches, read_plan
from xtts_train.cli import main
from xtts_train.compile.memory import training_bytes
from xtts_train.config import load_stack_config
from xtts_train.errors import ConfigError
from xtts_train.tasks.text_to_mel import TextToMelTask
from xtts_train.tasks.vocoder import VocoderTask
from xtts_train.training import planner
from xtts_train.training.planner import estimate_costs
from xtts_train.training.task import check_task_settings

GiB = 2**30
COSTS = [BucketCost(frames=64, text_len=16, fixed=GiB // 4, per_row=10 * 2**20),
         BucketCost(frames=128, text_len=24, fixed=GiB // 4, per_row=30 * 2**20)]  # fmt: skip


def test_each_bucket_gets_the_largest_batch_within_the_budget():
    plan = plan_batches(COSTS, 2.0, baseline=GiB // 2, multiple=4)
    room = FILL * 2 * GiB - GiB // 2
    for i, (cost, batch) in enumerate(zip(COSTS, plan.batch_sizes, strict=True)):
        assert batch % 4 == 0
        assert plan.peak(i) <= FILL * 2 * GiB
        assert GiB // 2 + cost.bytes(batch + 4) > FILL * 2 * GiB  # 4 rows more would not fit
        assert batch == int((room - cost.fixed) // cost.per_row) // 4 * 4
    assert plan.batch_sizes[0] > plan.batch_sizes[1]  # a frame of a long bucket costs more
    assert "data.batch_sizes=[" + ",".join(map(str, plan.batch_sizes)) + "]" in plan.format()


def test_a_budget_too_small_for_one_row_names_the_bucket_and_the_least_budget():
    with pytest.raises(xd.ConfigError, match=r"Expected train.memory_budget_gb >= ([\d.]+) \(1 row\(s\) of the 128-frame x 24-token bucket need it, with 0.50 GiB held before the steps\), received: memory_budget_gb=0.8$") as refused:  # fmt: skip
        plan_batches(COSTS, 0.8, baseline=GiB // 2)
    least = float(re.search(r">= ([\d.]+)", str(refused.value))[1])
    assert min(plan_batches(COSTS, least, baseline=GiB // 2).batch_sizes) >= 1


def test_estimated_lines_are_the_training_estimate():
    stack = load_stack_config(None, ["model.preset=xtts"])
    shapes = [BatchShape(frames=400, text_len=64, batch_size=1)]
    (cost,) = estimate_costs(stack, shapes)
    for batch in (1, 5):
        assert cost.bytes(batch) == training_bytes(stack.model, batch, 64, 400,
                                                   cond_frames=stack.data.cond_frames)  # fmt: skip


@pytest.mark.slow  # steps measured in another process are the subject: `hatch run test-slow`
def test_measured_lines_come_from_real_steps_in_another_process():
    stack = load_stack_config(None, [*OVERRIDES, *MICRO, "train.compiler=graph"])
    shapes = [BatchShape(frames=64, text_len=8, batch_size=4),
              BatchShape(frames=1024, text_len=8, batch_size=4)]  # fmt: skip
    costs, baseline = planner.measure_costs(TextToMelTask, stack, shapes)
    assert [(c.frames, c.text_len) for c in costs] == [(64, 8), (1024, 8)]
    assert all(c.per_row > 0 and c.fixed >= 0 for c in costs)
    assert costs[1].per_row > 2 * costs[0].per_row  # 16 times the frames: more bytes a row
    assert baseline > 200 * 2**20  # TensorFlow, the model and the pipeline's allowance


@pytest.mark.parametrize(("value", "match"), [(0, "positive"), (-1.5, "positive"),
                                              ("4", "positive")])  # fmt: skip
def test_memory_budget_is_a_positive_number(value, match):
    with pytest.raises(ConfigError, match=f"memory_budget_gb.*{match}"):
        load_stack_config(None, [f"train.memory_budget_gb={value!r}"])
    stack = load_stack_config(None, ["train.memory_budget_gb=4", "train.task=vocoder"])
    with pytest.raises(
        ConfigError,
        match=r"^Expected train.memory_budget_gb null for the vocoder task \(no buckets to plan",
    ):
        check_task_settings(VocoderTask, stack)  # as fit and check do before any work


def test_fit_trains_on_the_planned_sizes_and_a_resume_keeps_them(cache, tmp_path, monkeypatch):
    measured = []

    def fake_measure(task, stack, shapes):  # the lines a real measurement would give, fast
        measured.append([s.key for s in shapes])
        return [BucketCost(s.frames, s.text_len, 2**20, s.frames * 2**16) for s in shapes], 0

    monkeypatch.setattr(planner, "measure_costs", fake_measure)
    run = tmp_path / "run"
    # One bucket: each fit traces one program instead of two. A size per bucket of several
    # is the planner's (the tests above); here, that fit and its resume train on the plan.
    args = ["fit", "--data", str(cache), "--workdir", str(run), "--quiet",
            *as_cli([*ONE_SHAPE, *MICRO, "train.memory_budget_gb=0.01"])]  # fmt: skip
    assert main([*args, "--steps", "2"]) == 0
    config = yaml.safe_load((run / "config.yaml").read_text())
    sizes = config["data"]["batch_sizes"]
    frames = [key[2] for key in measured[0]]
    room = FILL * 0.01 * GiB
    assert sizes == [int((room - 2**20) // (f * 2**16)) for f in frames]
    assert sizes != [4]  # not data.batch_size's
    assert list(read_plan(run).batch_sizes) == sizes  # for `xtts-data doctor --plan RUN`
    summary = yaml.safe_load((run / "summary.json").read_text())
    assert summary["compiled_shapes"] == len(sizes)
    assert {int(k.split("x")[0]) for k in summary["step_ms_by_shape"]} <= set(sizes)
    assert main([*args, "--steps", "4"]) == 0  # the resume: the same sizes, not measured
    assert len(measured) == 1
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["batch_sizes"] == sizes


def test_check_estimate_prints_the_plan_without_building_anything(cache, capsys, monkeypatch,
                                                                  tmp_path):  # fmt: skip
    monkeypatch.setattr(planner, "measure_costs", lambda *a: pytest.fail("measured"))
    base = ["check", "--data", str(cache), "--estimate", *as_cli([*OVERRIDES, *MICRO])]
    saved = tmp_path / "plan.json"
    assert main([*base, "--set", "train.memory_budget_gb=2", "--save-plan", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "memory plan (estimated): budget 2.00 GiB" in out
    assert re.search(r"data.batch_sizes=\[\d+,\d+\]", out)
    assert read_plan(saved).format() in out
    assert main([*base, "--save-plan", str(saved)]) == 2  # no budget: no plan to save
    assert "set train.memory_budget_gb" in capsys.readouterr().err
    assert main([*base, "--set", "train.memory_budget_gb=0.001"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "Expected train.memory_budget_gb >= " in line
