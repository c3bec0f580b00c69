"""`xtts_data.plan`: a memory plan's file round-trips, and a file that is not one is named."""

from __future__ import annotations

import pytest

from xtts_data.errors import ConfigError
from xtts_data.plan import BucketCost, plan_batches, read_plan, write_plan

COSTS = (BucketCost(frames=64, text_len=16, fixed=2**28, per_row=10 * 2**20),
         BucketCost(frames=128, text_len=24, fixed=2**28, per_row=30 * 2**20))  # fmt: skip


def test_a_plan_reads_back_as_written(tmp_path):
    plan = plan_batches(COSTS, 2.0, baseline=2**29, multiple=2, source="estimated")
    write_plan(plan, tmp_path / "plan.json")
    assert read_plan(tmp_path / "plan.json") == plan
    assert read_plan(tmp_path / "plan.json").format() == plan.format()


@pytest.mark.parametrize(("text", "match"), [
    ("{not json", "JSONDecodeError"),
    ('{"format": 2}', "format 2, not 1"),
    ('{"format": 1, "budget": 1}', "KeyError: 'costs'"),
])  # fmt: skip
def test_a_file_that_is_not_a_plan_is_named(tmp_path, text, match):
    (tmp_path / "plan.json").write_text(text)
    with pytest.raises(ConfigError, match=f"Expected a memory plan.*plan.json.*{match}"):
        read_plan(tmp_path / "plan.json")
