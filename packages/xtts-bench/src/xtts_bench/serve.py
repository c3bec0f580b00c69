"""`xtts-bench serve`: xtts-serve measured from the client's side, side by side with the
same server forced to one slot (one request decoded at a time: how the anchors serve).

Each server is a new `xtts-serve` process (the console script) on localhost with the run
and the vocoder; the clients are threads of this process, one HTTP connection each,
speaking held-out sentences (`SENTENCES`, none of them a training text) as streams of raw
PCM (`response_format: pcm`), one request after another for `seconds` per level. Per
level of concurrent clients:

- time to first audio: the request sent → its first PCM byte read, p50 and p95;
- aggregate real-time factor: seconds of audio received per second of the level;
- requests/s completed, and 503s (counted; the client moves on to its next sentence);
- start-up: the launch of each server → `GET /healthz` 200, with an empty compile cache
  (cold) and again on the cache the first filled (warm).

With `voice` (the run and the vocoder exported, `xtts-train export --format onnx`), the
same levels on `xtts-serve --runtime onnx` with `slots` slots and with one, beside
TensorFlow's two, and its start-up (it compiles nothing).

Standard library only (and tqdm): nothing here imports TensorFlow, so the clients do not
share the server's process, and `--help` is fast.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

import tqdm

from xtts_bench.errors import SettingsError

__all__ = [
    "SENTENCES",
    "ServeBenchConfig",
    "ServeProcess",
    "check_counts",
    "check_runs",
    "format_serve_table",
    "run_serve_benchmark",
]

# Held-out sentences (Harvard sentences, lists 1-2): what the clients speak, in turn.
SENTENCES = (
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServeBenchConfig:
    """Settings of `xtts-bench serve`.

    Attributes:
        run: a text-to-mel run (`xtts-train fit`).
        vocoder: a vocoder run trained on the run's audio settings (streams need one).
        clients: the levels of concurrent streaming clients.
        seconds: how long each level runs (a request in flight at its end is finished).
        slots: the measured server's `--slots`; the baseline has 1.
        voice: the run exported with `--slots` `slots` and 1 (`xtts-train export --format
            onnx`): its servers (`--runtime onnx`) measured too; None: TensorFlow's alone.
        max_queue: both servers' `--max-queue`.
        port: the first port tried on 127.0.0.1 (the next free one is used).
    """

    run: pathlib.Path
    vocoder: pathlib.Path
    clients: tuple[int, ...] = (1, 2, 4, 8, 16)
    seconds: float = 20.0
    slots: int = 8
    voice: pathlib.Path | None = None
    max_queue: int = 64
    port: int = 8750

    def __post_init__(self) -> None:
        check_runs(self, ("run", "vocoder"))
        if self.voice is not None:
            voice = pathlib.Path(self.voice)
            if not (voice / "voice.json").is_file():
                raise SettingsError(f"ServeBenchConfig.voice: expected a voice folder (with "
                                    f"voice.json; xtts-train export --format onnx), received: "
                                    f"voice={str(voice)!r}")  # fmt: skip
            object.__setattr__(self, "voice", voice)
        if not self.clients or any(isinstance(c, bool) or not isinstance(c, int) or c < 1
                                   for c in self.clients):  # fmt: skip
            raise SettingsError(f"ServeBenchConfig.clients: expected ints >= 1, received: "
                                f"clients={self.clients!r}")  # fmt: skip
        check_counts(self, ("slots", "max_queue", "port"))
        if not self.seconds > 0:
            raise SettingsError(f"ServeBenchConfig.seconds: expected a number > 0, received: "
                                f"seconds={self.seconds!r}")  # fmt: skip


def check_runs(config, names: Sequence[str]) -> None:
    """Each of `config`'s fields `names` made a Path to a run folder (with config.yaml).

    Raises:
        SettingsError: naming the field and the folder that is not a run.
    """
    for name in names:
        path = pathlib.Path(getattr(config, name))
        if not (path / "config.yaml").is_file():
            raise SettingsError(f"{type(config).__name__}.{name}: expected a run folder (with "
                                f"config.yaml), received: {name}={str(path)!r}")  # fmt: skip
        object.__setattr__(config, name, path)


def check_counts(config, names: Sequence[str]) -> None:
    """Each of `config`'s fields `names` is an int >= 1.

    Raises:
        SettingsError: naming the field and its value.
    """
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SettingsError(f"{type(config).__name__}.{name}: expected an int >= 1, "
                                f"received: {name}={value!r}")  # fmt: skip


def run_serve_benchmark(bench: ServeBenchConfig, *, progress: bool = True) -> dict:
    """Start-up (cold, warm) and the client levels, for `bench.slots` slots and for one
    (and on onnxruntime, with `bench.voice`).

    Raises:
        SettingsError: no `xtts-serve` script, or a server that exits before it is ready.
    """
    _console_script()  # before anything starts
    results: dict = {"cores": len(os.sched_getaffinity(0)), "slots": bench.slots,
                     "seconds_per_level": bench.seconds, "servers": {}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="xtts-bench-serve-") as tmp:
        cache = pathlib.Path(tmp) / "xla"
        with _server(bench, bench.slots, cache) as cold:
            results["startup_cold_s"] = cold.ready_seconds
        runtimes = ("tf",) if bench.voice is None else ("tf", "onnx")
        for runtime in runtimes:
            for slots in (bench.slots, 1):
                with _server(bench, slots, cache, runtime=runtime) as server:
                    if slots == bench.slots:
                        key = "startup_warm_s" if runtime == "tf" else "startup_onnx_s"
                        results[key] = server.ready_seconds
                    name = f"{slots} slots" if slots > 1 else "1 slot"
                    name = name if runtime == "tf" else f"onnx {name}"
                    levels = {}
                    for clients in tqdm.tqdm(bench.clients, desc=name, disable=not progress):
                        levels[clients] = _level(server.port, clients, bench.seconds)
                    results["servers"][name] = levels
    return results


def format_serve_table(results: dict) -> str:
    """The figures as a text table: one row per server and level."""
    lines = [f"xtts-serve, {results['cores']} cores, {results['seconds_per_level']:g} s a "
             f"level; start-up {results['startup_cold_s']:.1f} s cold, "
             f"{results['startup_warm_s']:.1f} s warm (launch → /healthz 200)"
             + (f"; onnx {results['startup_onnx_s']:.1f} s" if "startup_onnx_s" in results
                else ""),
             f"{'server':<10}{'clients':>8}{'TTFA p50':>10}{'p95 ms':>8}{'RTF':>8}"
             f"{'req/s':>8}{'503s':>6}{'done':>6}"]  # fmt: skip
    for server, levels in results["servers"].items():
        for clients, f in levels.items():
            ttfa = f"{f['ttfa_p50_ms']:>10.0f}{f['ttfa_p95_ms']:>8.0f}"
            rest = f"{f['requests_per_s']:>8.2f}{f['busy']:>6}{f['requests']:>6}"
            lines.append(f"{server:<14}{clients:>8}{ttfa}{f['real_time_factor']:>8.2f}{rest}")
    return "\n".join(lines)


def _server(bench: ServeBenchConfig, slots: int, cache: pathlib.Path, *,
            runtime: str = "tf") -> ServeProcess:  # fmt: skip
    if runtime == "onnx":
        return ServeProcess(bench.voice, None, slots=slots, port=bench.port,
                            max_queue=bench.max_queue, cache=cache,
                            extra=("--runtime", "onnx"))  # fmt: skip
    return ServeProcess(bench.run, bench.vocoder, slots=slots, port=bench.port,
                        max_queue=bench.max_queue, cache=cache)  # fmt: skip


class ServeProcess:
    """An `xtts-serve` process on 127.0.0.1 (the console script), ready (its `/healthz`
    200) when entered, terminated when left; texts of up to 400 characters.

    Args:
        run, vocoder: its `--run` and `--vocoder` (None: none, as `--runtime onnx`).
        slots, max_queue: its `--slots` and `--max-queue`.
        port: the first port tried (the next free one is used).
        cache: its compile cache (`XTTS_COMPILE_CACHE`).
        extra: more of its flags.

    Attributes:
        ready_seconds: launch → ready, once entered.
    """

    def __init__(self, run: pathlib.Path, vocoder: pathlib.Path | None, *, slots: int,
                 port: int, max_queue: int, cache: pathlib.Path,
                 extra: Sequence[str] = ()) -> None:  # fmt: skip
        self.port = _free_port(port)
        voiced = () if vocoder is None else ("--vocoder", str(vocoder))
        self._command = [_console_script(), "--run", str(run), *voiced, "--port",
                         str(self.port), "--slots", str(slots), "--max-queue", str(max_queue),
                         "--max-chars", "400", *extra]  # fmt: skip
        self._cache = cache

    def __enter__(self) -> ServeProcess:
        env = {**os.environ, "XTTS_COMPILE_CACHE": str(self._cache)}
        started = time.perf_counter()
        self._log = tempfile.TemporaryFile()  # its stderr: a pipe nobody reads would fill
        self._process = subprocess.Popen(self._command, env=env, stdout=subprocess.DEVNULL,
                                         stderr=self._log)  # fmt: skip
        while _health(self.port) != 200:
            if self._process.poll() is not None:
                self._log.seek(0)
                raise SettingsError(f"Expected xtts-serve to start, received: exit "
                                    f"{self._process.returncode}: "
                                    f"{self._log.read().decode()[-500:]}")  # fmt: skip
            time.sleep(0.05)
        self.ready_seconds = time.perf_counter() - started
        return self

    def __exit__(self, *exc) -> None:
        self._process.terminate()
        self._process.wait(60)
        self._log.close()

    @property
    def alive(self) -> bool:
        """The process runs and answers `GET /healthz` 200."""
        return self._process.poll() is None and _health(self.port) == 200

    def rss_mb(self) -> float:
        """Its resident memory now, MB (`VmRSS` of /proc/PID/status; NaN once it ended)."""
        try:
            status = pathlib.Path(f"/proc/{self._process.pid}/status").read_text()
        except OSError:
            return float("nan")
        kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))
        return int(kb) / 1024


def _level(port: int, clients: int, seconds: float) -> dict:
    """`clients` threads speaking `SENTENCES` in turn for `seconds`."""
    records: list[dict] = []
    lock, deadline = threading.Lock(), time.perf_counter() + seconds

    def client(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        turn = index
        while time.perf_counter() < deadline:
            record = _speak(connection, SENTENCES[turn % len(SENTENCES)])
            with lock:
                records.append(record)
            turn += clients
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    done = [r for r in records if r["status"] == 200]
    firsts = sorted(r["ttfa"] for r in done)
    return {
        "requests": len(done), "busy": sum(r["status"] == 503 for r in records),
        "errors": sum(r["status"] not in (200, 503) for r in records),
        "ttfa_p50_ms": 1000 * _quantile(firsts, 0.5), "ttfa_p95_ms": 1000 * _quantile(firsts, 0.95),
        "real_time_factor": sum(r["audio_s"] for r in done) / wall,
        "requests_per_s": len(done) / wall, "wall_s": wall,
    }  # fmt: skip


def _speak(connection: http.client.HTTPConnection, text: str) -> dict:
    """One streamed request: its status, time to its first PCM byte, and audio seconds."""
    body = json.dumps({"model": "xtts", "input": text, "response_format": "pcm",
                       "stream": True}).encode()  # fmt: skip
    sent = time.perf_counter()
    connection.request("POST", "/v1/audio/speech", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        response.read()
        return {"status": response.status}
    first, received = None, 0
    while chunk := response.read1(65536):
        first = first or time.perf_counter() - sent
        received += len(chunk)
    rate = int(response.headers["X-Sample-Rate"])
    return {"status": 200, "ttfa": first, "audio_s": received / 2 / rate}


def _quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of sorted `values` (nearest rank); NaN for none."""
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, round(q * len(values)) - 1))]


def _health(port: int) -> int | None:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/healthz")
        status = connection.getresponse().status
        connection.close()
        return status
    except OSError:
        return None


def _free_port(first: int) -> int:
    """The first port from `first` that nothing listens on."""
    for port in range(first, first + 100):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise SettingsError(f"Expected a free port from {first}, received: 100 ports in use")


def _console_script() -> str:
    """The `xtts-serve` script beside this Python (its environment's), else on PATH.

    Raises:
        SettingsError: no such script (xtts-bench does not require xtts-serve).
    """
    script = pathlib.Path(sys.executable).with_name("xtts-serve")
    found = str(script) if script.exists() else shutil.which("xtts-serve")
    if found is None:
        raise SettingsError("Expected the xtts-serve console script, received: none installed "
                            "beside this Python or on PATH; pip install ./packages/xtts-serve "
                            "(the hatch environment has it)")  # fmt: skip
    return found
