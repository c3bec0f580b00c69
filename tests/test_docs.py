"""The docs as references (issue 48 item 5): each package README reads in one sitting
(at most 500 lines), no table cell is a paragraph (at most 60 words), and every relative
link between the repository's Markdown files reaches a file and, with `#anchor`, one of
its headings (GitHub's anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_READMES = sorted(ROOT.glob("packages/*/README.md"))
MARKDOWN = [ROOT / "README.md", *PACKAGE_READMES, *sorted(ROOT.glob("docs/**/*.md"))]
MAX_README_LINES = 500
MAX_CELL_WORDS = 60

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
_CELL = re.compile(r"(?<!\\)\|")


def _prose(path: Path) -> str:
    """The file without its fenced code blocks (a `# comment` in bash is not a heading)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped,
    spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path).splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            base = anchor(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_files_are_found():
    assert len(PACKAGE_READMES) >= 4
    assert ROOT / "docs" / "benchmarks.md" in MARKDOWN


@pytest.mark.parametrize("readme", PACKAGE_READMES, ids=_name)
def test_a_package_readme_reads_in_one_sitting(readme):
    lines = len(readme.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"{_name(readme)}: {lines} lines"


@pytest.mark.parametrize("path", MARKDOWN, ids=_name)
def test_no_table_cell_is_a_paragraph(path):
    long = []
    for number, line in enumerate(_prose(path).splitlines(), 1):
        if line.lstrip().startswith("|"):
            for cell in _CELL.split(line.strip())[1:-1]:
                if len(cell.split()) > MAX_CELL_WORDS:
                    long.append(f"line {number}: {len(cell.split())} words")
    assert not long, f"{_name(path)}: cells over {MAX_CELL_WORDS} words: {long}"


@pytest.mark.parametrize("path", MARKDOWN, ids=_name)
def test_relative_links_reach_a_file_and_heading(path):
    broken = []
    for target in _LINK.findall(_prose(path)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{_name(path)}: {broken}"


@pytest.mark.parametrize(
    ("heading", "expected"),
    [("Start-up, measured (2-core shared CPU, 2026-11-24)",
      "start-up-measured-2-core-shared-cpu-2026-11-24"),
     ("`xtts-bench peers`: xtts vs Glow-TTS", "xtts-bench-peers-xtts-vs-glow-tts"),
     ("The asv suite (`benchmarks/`, `asv.conf.json`)",
      "the-asv-suite-benchmarks-asvconfjson")],
)  # fmt: skip
def test_anchors_are_githubs(heading, expected):
    assert anchor(heading) == expected
