"""The root README's promises to a newcomer: a two-line Quickstart, and the command that
trains on your own corpus within the first 60 lines."""

from __future__ import annotations

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_quickstart_is_two_command_lines():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    lines = [line for line in blocks[0].splitlines() if line.strip()]
    assert lines == [
        'pip install "hatch>=1.16" && hatch run demo',
        'pip install "hatch>=1.16" && hatch run test',
    ]


def test_own_corpus_commands_are_within_the_first_60_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    first = {name: next(i for i, line in enumerate(lines, 1) if line.startswith(name))
             for name in ("xtts-data prepare", "xtts-train fit --data")}  # fmt: skip
    assert first["xtts-data prepare"] < first["xtts-train fit --data"] < 60, first
