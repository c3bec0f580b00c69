"""The suite's profiler (`hatch run test-profile`): its Markdown and where it writes it."""

from __future__ import annotations

import sys

import pytest
from suite_profile import MARKERS, _kind, format_profile, write_between_markers

RECORDS = [
    {"test": "a.py::slow", "seconds": 30.0, "kinds": {"subprocess": 25.0, "other": 5.0}},
    {"test": "a.py::quick", "seconds": 0.2, "kinds": {"other": 0.2}},
    {"test": "b.py::middle", "seconds": 4.0, "kinds": {"compiling": 4.0}},
    {"file": "a.py", "seconds": 30.2, "peak_mb": 900},
    {"file": "b.py", "seconds": 4.0, "peak_mb": None},
]


def test_the_profile_lists_the_slowest_tests_and_files_first():
    text = format_profile(RECORDS, wall=60.0, command="-n 2")
    assert "3 tests in 2 files, 1.0 min of wall time" in text
    assert "subprocess 0.4 min, other 0.1 min, compiling 0.1 min" in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows == ["| `a.py::slow` | 30.0 | subprocess 25 s, other 5 s |",
                    "| `b.py::middle` | 4.0 | compiling 4 s |",
                    "| `a.py::quick` | 0.2 |  |",
                    "| `a.py` | 30.2 | 900 |", "| `b.py` | 4.0 | ? |"]  # fmt: skip


@pytest.mark.parametrize("before", ["", "# Doc\n\ntext\n", "# Doc\n\n{start}\nold\n{end}\nafter\n"])
def test_the_profile_replaces_only_what_lies_between_its_markers(tmp_path, before):
    doc = tmp_path / "development.md"
    doc.write_text(before.format(start=MARKERS[0], end=MARKERS[1]))
    write_between_markers(doc, "new")
    write_between_markers(doc, "newer")
    text = doc.read_text()
    assert text.count(MARKERS[0]) == 1
    assert f"{MARKERS[0]}\nnewer\n{MARKERS[1]}" in text
    assert "old" not in text
    assert ("after" in text) == ("after" in before)
    assert ("text" in text) == ("text" in before)


def test_a_stack_is_named_by_its_innermost_known_frame():
    assert _kind(sys._getframe()) == "other"
    assert _kind(None) == "other"
