"""Resident memory of each pytest worker, file by file: `hatch run test-memory`.

A pytest plugin (`-p rss_per_file`). After the last test of each file, a worker appends
`<file> <RSS MB> <peak RSS MB>` (from /proc/self/status, so Linux only) to its own log in
`$XTTS_RSS_DIR` (default: a new temporary folder); the terminal summary names each
worker's peak and the files after which its memory grew most.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_ENV = "XTTS_RSS_DIR"


def _status_mb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def pytest_configure(config) -> None:
    if not hasattr(config, "workerinput"):  # the controller: before the workers start
        os.environ.setdefault(_ENV, tempfile.mkdtemp(prefix="xtts-rss-"))


def pytest_runtest_teardown(item, nextitem) -> None:
    if nextitem is not None and nextitem.path == item.path:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = f"{item.path} {_status_mb('VmRSS')} {_status_mb('VmHWM')}\n"
    with open(Path(os.environ[_ENV]) / f"{worker}.log", "a") as log:
        log.write(line)


def pytest_terminal_summary(terminalreporter) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return
    folder = Path(os.environ[_ENV])
    terminalreporter.section(f"resident memory per worker ({folder})")
    for log in sorted(folder.glob("*.log")):
        rows = [line.split() for line in log.read_text().splitlines()]
        rss = [int(row[1]) for row in rows]
        pairs = zip(rss[:-1], rss[1:], rows[1:], strict=True)
        grew = [(now - before, row[0]) for before, now, row in pairs]
        top = ", ".join(f"{Path(path).name} +{mb}" for mb, path in sorted(grew)[::-1][:4])
        peak = max(int(row[2]) for row in rows)
        line = f"{log.stem}: peak {peak} MB over {len(rows)} file(s)"
        terminalreporter.write_line(f"{line}; grew most after {top} (MB)" if grew else line)
