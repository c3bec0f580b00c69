"""Where the test suite's time and memory go: `hatch run test-profile`.

A pytest plugin (`-p suite_profile`). Each pytest worker records, for every test, its
wall time (setup + call + teardown, so a fixture's cost falls on the first test that
asks for it) and what that time was spent on, by sampling its own main thread's stack
every `_PERIOD` seconds and naming the innermost activity it recognises (`KINDS`); and for
every file, its wall time and the worker's peak resident memory while it ran (Linux:
/proc's VmHWM, reset at the file's start; a subprocess's memory is its own, not counted).

The controller gathers the workers' records and prints the summary; with
`--profile-out FILE` it writes it as Markdown between `MARKERS` in FILE (docs/development.md),
with the date, the commit and the pytest command line.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_ENV = "XTTS_PROFILE_DIR"
_PERIOD = 0.01  # seconds between stack samples
MARKERS = ("<!-- test-profile:start -->", "<!-- test-profile:end -->")
SLOWEST = 30

# What a sampled stack is doing, by the first frame (innermost first) that matches: a
# (path fragment, function or None for any) pair per kind. A stack that matches none is
# "other" (pytest, imports, the tests' own arithmetic, TensorFlow's eager ops).
KINDS = {
    "subprocess": [("/subprocess.py", None), ("/multiprocessing/", None)],
    "compiling": [("/numba/", None),
                  ("/xtts_train/compile/", None), ("/polymorphic_function/tracing_compilation", None),
                  ("/framework/func_graph.py", None), ("/steps.py", "warm_up"),
                  ("/xtts_serve/engine.py", "warm_up"), ("/inference/vocoding.py", "warm_up")],
    "training steps": [("/xtts_train/training/trainer.py", "train")],
    "corpus synthesis": [("/xtts_data/demo_corpus.py", None), ("/xtts_data/_demo_", None)],
    "feature cache": [("/xtts_data/cache.py", None), ("/xtts_data/derive.py", None)],
    "decoding": [("/inference/", None), ("/text_to_mel/decoding.py", None)],
    "importing": [("<frozen importlib", None)],
}  # fmt: skip


def pytest_addoption(parser) -> None:
    parser.addoption("--profile-out", metavar="FILE", default=None,
                     help="write the profile into FILE between its test-profile markers")  # fmt: skip


def pytest_configure(config) -> None:
    worker = hasattr(config, "workerinput")
    if not worker:  # the controller: before the workers start
        os.environ.setdefault(_ENV, tempfile.mkdtemp(prefix="xtts-profile-"))
    if worker or not getattr(config.option, "numprocesses", None):  # where tests run
        config.pluginmanager.register(_Recorder(Path(os.environ[_ENV])), "suite_profile_recorder")


class _Sampler(threading.Thread):
    """Counts, per kind, the samples of one thread's stack since `take` last ran."""

    def __init__(self, thread_id: int) -> None:
        super().__init__(daemon=True, name="suite-profile")
        self.thread_id, self.counts, self.lock = thread_id, collections.Counter(), threading.Lock()

    def run(self) -> None:
        while True:
            time.sleep(_PERIOD)
            frame = sys._current_frames().get(self.thread_id)
            kind = _kind(frame)
            with self.lock:
                self.counts[kind] += 1

    def take(self) -> collections.Counter:
        with self.lock:
            counts, self.counts = self.counts, collections.Counter()
        return counts


def _kind(frame) -> str:
    while frame is not None:
        code = frame.f_code
        for kind, places in KINDS.items():
            for fragment, function in places:
                if fragment in code.co_filename and function in (None, code.co_name):
                    return kind
        frame = frame.f_back
    return "other"


class _Recorder:
    """A worker's records: one JSON line a test and one a file, in its own log."""

    def __init__(self, folder: Path) -> None:
        self.log = folder / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl"
        self.sampler = _Sampler(threading.get_ident())
        self.sampler.start()
        self.file, self.file_seconds, self.seconds = None, 0.0, collections.defaultdict(float)
        self.file_done = False  # the current test is its file's last: write the file's line

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        path = nodeid.split("::")[0]
        if path != self.file:
            _reset_peak()
            self.file, self.file_seconds = path, 0.0
        self.sampler.take()  # what came before this test is not its own

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[report.nodeid] += report.duration
        if report.when == "teardown":
            seconds = self.seconds.pop(report.nodeid)
            self.file_seconds += seconds
            counts = self.sampler.take()
            total = sum(counts.values()) or 1
            kinds = {k: round(seconds * n / total, 2) for k, n in counts.most_common()}
            self._write(test=report.nodeid, seconds=round(seconds, 3), kinds=kinds,
                        outcome=report.outcome)  # fmt: skip

    def pytest_runtest_teardown(self, item, nextitem) -> None:
        self.file_done = nextitem is None or nextitem.path != item.path

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        if self.file_done:
            self.file_done = False
            self._write(file=self.file, seconds=round(self.file_seconds, 2),
                        peak_mb=_peak_mb())  # fmt: skip

    def _write(self, **record) -> None:
        with open(self.log, "a") as log:
            log.write(json.dumps(record) + "\n")


def _reset_peak() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def _peak_mb() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def pytest_sessionstart(session) -> None:
    session.config._profile_began = time.perf_counter()


def pytest_terminal_summary(terminalreporter, config) -> None:
    if hasattr(config, "workerinput"):
        return
    folder = Path(os.environ[_ENV])
    records = [json.loads(line) for log in sorted(folder.glob("*.jsonl"))
               for line in log.read_text().splitlines()]  # fmt: skip
    wall = time.perf_counter() - config._profile_began
    text = format_profile(records, wall=wall, command=" ".join(sys.argv[1:]))
    terminalreporter.section("test profile")
    terminalreporter.write_line(text)
    out = config.getoption("--profile-out")
    if out:
        write_between_markers(Path(out), text)
        terminalreporter.write_line(f"written into {out}")


def format_profile(records: list[dict], *, wall: float, command: str) -> str:
    """The profile as Markdown: the run, each file's time and peak memory, the slowest
    tests with their time by kind."""
    tests = [r for r in records if "test" in r]
    files = sorted((r for r in records if "file" in r), key=lambda r: -r["seconds"])
    kinds = collections.Counter()
    for test in tests:
        kinds.update(test["kinds"])
    busy = sum(t["seconds"] for t in tests)
    lines = [
        f"Measured {datetime.date.today().isoformat()} at {_commit()}, `pytest {command}`: "
        f"{len(tests)} tests in {len(files)} files, {wall / 60:.1f} min of wall time, "
        f"{busy / 60:.1f} min of test time over the workers.",
        "",
        "Test time by what it was spent on (sampled stacks): "
        + ", ".join(f"{k} {v / 60:.1f} min" for k, v in kinds.most_common()) + ".",
        "",
        f"The {SLOWEST} slowest tests (a fixture's cost falls on the first test that asks for it):",
        "",
        "| test | s | spent on |",
        "| --- | ---: | --- |",
    ]  # fmt: skip
    for test in sorted(tests, key=lambda t: -t["seconds"])[:SLOWEST]:
        spent = ", ".join(f"{k} {v:.0f} s" for k, v in test["kinds"].items() if v >= 0.5)
        lines.append(f"| `{test['test']}` | {test['seconds']:.1f} | {spent} |")
    lines += ["", "Every file, slowest first (peak RSS: the worker's while it ran):", "",
              "| file | s | peak RSS MB |", "| --- | ---: | ---: |"]  # fmt: skip
    lines += [f"| `{f['file']}` | {f['seconds']:.1f} | {f['peak_mb'] or '?'} |" for f in files]
    return "\n".join(lines)


def write_between_markers(path: Path, text: str) -> None:
    """Replace what lies between `MARKERS` in `path` with `text` (the markers appended at
    the end where absent)."""
    start, end = MARKERS
    old = path.read_text() if path.exists() else ""
    if start in old and end in old:
        before, rest = old.split(start, 1)
        after = rest.split(end, 1)[1]
    else:
        before, after = old.rstrip("\n") + "\n\n", "\n"
    path.write_text(f"{before}{start}\n{text}\n{end}{after}")


def _commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "an unknown commit"
    return done.stdout.strip() + (" (uncommitted changes)" if _dirty() else "")


def _dirty() -> bool:
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                          capture_output=True, text=True)  # fmt: skip
    return bool(done.stdout.strip())
