"""What a process does before TensorFlow starts: lazy exports, a quiet stderr, its age.

Standard library only: a console script parses its arguments, answers `--help` and rejects
bad ones without loading TensorFlow (seconds), then sets up logging and stderr before the
command's implementation imports it.

- `lazy_exports`: a package `__init__` re-exports names from its submodules on first access
  (PEP 562), so `import xtts_train` costs nothing until a TensorFlow name is used.
- `quiet_tensorflow`: TensorFlow's C++ start-up notices go straight to file descriptor 2,
  most before `TF_CPP_MIN_LOG_LEVEL` is read; a filter process drops the known-benign lines
  listed in `NOISE` and passes every other byte through at once.
- `verbose_flag`, `start_cli`: the two calls every `xtts-*` console script makes.
- `process_age_seconds`: seconds since this process started (time to first step).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import importlib
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

__all__ = [
    "NOISE",
    "Noise",
    "is_noise",
    "lazy_exports",
    "process_age_seconds",
    "quiet_tensorflow",
    "start_cli",
    "verbose_flag",
]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module `__getattr__` and `__dir__` that import each name on first use.

    Usage, in `xtts_audio/__init__.py`: `__getattr__, __dir__ = lazy_exports(__name__,
    {"mel_spectrogram": "spectral", ...})`; `xtts_audio.mel_spectrogram` then imports
    `xtts_audio.spectral` the first time it is read.

    As with eager re-exports, a name wins over a submodule of the same name
    (`xtts_audio.resample` is the function even after `import xtts_audio.resample`): the
    package module's class becomes one that does not let the import system bind such a
    submodule over the name.

    Args:
        package: the package's `__name__`, while its `__init__` runs.
        exports: public name -> the submodule that defines it, relative to `package`.

    Returns:
        `(__getattr__, __dir__)` for the package module (PEP 562).
    """
    exports = dict(exports)
    module = sys.modules[package]

    class _LazyPackage(type(module)):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in exports and value is sys.modules.get(f"{package}.{name}"):
                return  # a submodule just imported: `__getattr__` gives the name instead
            super().__setattr__(name, value)

    def getattr_(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        setattr(module, name, value)  # later reads skip this function
        return value

    def dir_() -> list[str]:
        return sorted({*vars(module), *exports})

    module.__class__ = _LazyPackage
    return getattr_, dir_


class Noise(NamedTuple):
    """A line TensorFlow writes that tells the user nothing to act on.

    Attributes:
        source: the C++ file that logs it (the line then starts with a log prefix, see
            `_PREFIX`), or None for a line written bare.
        lead: its text's literal start (after the prefix).
        rest: a regular expression for the rest of the line.
    """

    source: str | None
    lead: bytes
    rest: bytes = b""


NOISE: tuple[Noise, ...] = (
    # oneDNN kernels may sum in another order than Eigen's: results differ in the last bits,
    # which no test here depends on. Printed at every start where oneDNN is on (by default on
    # CPUs with AVX-512), twice (two libraries load).
    Noise("port.cc", b"oneDNN custom operations are on. You may see slightly different "
          b"numerical results due to floating-point round-off errors", rb"[^\n]*"),
    # absl's notice that it has not been initialised yet: the lines after it are the
    # notices themselves, not a change of where errors go.
    Noise(None, b"WARNING: All log messages before absl::InitializeLog() is called are "
          b"written to STDERR"),
    # The CPU feature guard on a host with more instruction sets than the wheel targets: a
    # suggestion to build TensorFlow from source, and its second line.
    Noise("cpu_feature_guard.cc", b"This TensorFlow binary is optimized to use available "
          b"CPU instructions in performance-critical operations."),
    Noise(None, b"To enable the following instructions: ",
          rb"[\w., ]+ in other operations, rebuild TensorFlow with the appropriate "
          rb"compiler flags\."),
    # The persistent XLA cache (TF_XLA_FLAGS=--tf_xla_persistent_cache_directory) first
    # tries to read each entry as text, fails, then reads it as the binary it is.
    Noise("text_format.cc", b"Error parsing text-format tensorflow.XlaSerializedCacheEntry: ",
          rb"[^\n]*"),
    # Loading a cached XLA:CPU program, LLVM lists the tuning pseudo-features
    # prefer-no-scatter/-gather among the compile machine's features, and the host's
    # feature list never has them. Any other feature (a real ISA mismatch) still shows.
    Noise("cpu_aot_loader.cc", b"Loading XLA:CPU AOT result. Target machine feature ",
          rb"\+prefer-no-(?:scatter|gather) is not +supported on the host machine\.[^\n]*"),
    # GPU builds: CUDA plugins and the computation placer register twice when two of
    # TensorFlow's libraries both carry them; the first registration is the one used.
    *(Noise(source, f"Unable to register {name} factory: Attempting to register factory "
            f"for plugin {name} when one has already been registered".encode())
      for source, name in [("cuda_dnn.cc", "cuDNN"), ("cuda_fft.cc", "cuFFT"),
                           ("cuda_blas.cc", "cuBLAS")]),
    Noise("computation_placer.cc", b"computation placer already registered.", rb"[^\n]*"),
)  # fmt: skip

# absl's prefix (`I0000 00:00:1795468178.755022    2507 port.cc:153] `) or, before absl
# starts, TensorFlow's own (`2025-02-09 09:37:32.334610: E external/.../cuda_fft.cc:607] `).
_PREFIX = (
    rb"(?:[IWEF]\d{4} [\d:.]+ +\d+ |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] )"
    rb"(?:[\w.-]+/)*"
)
_ANY_PREFIX = re.compile(_PREFIX + rb"[\w.-]+:\d+\] ")
# What a prefix cut short looks like (loosely), so a line cut by a read is held until it
# can be judged.
_PARTIAL_PREFIX = re.compile(
    rb"[IWEF](?:\d[\d :.]*(?:[\w./-]+(?::\d*\]?)?)?)?"
    rb"|\d[\d:. -]*(?:[IWEF](?: (?:[\w./-]+(?::\d*\]?)?)?)?)?"
)


def _pattern(noise: Noise) -> bytes:
    text = re.escape(noise.lead) + noise.rest
    if noise.source is None:
        return text
    return _PREFIX + re.escape(noise.source.encode()) + rb":\d+\] " + text


_LINE = re.compile(b"|".join(b"(?:%s)" % _pattern(n) for n in NOISE))
# A logged noise line glued to the end of a progress bar (no newline before it).
_GLUED = re.compile(b"(?:%s)\\Z" % b"|".join(_pattern(n) for n in NOISE if n.source))
_LONGEST_LINE = 1 << 14  # the longest noise line (cpu_aot_loader's) is ~2.6 kB


def is_noise(line: bytes) -> bool:
    """Whether `line` (with or without its newline) is one of the lines in `NOISE`."""
    return _LINE.fullmatch(line.removesuffix(b"\n")) is not None


def _agrees(text: bytes, lead: bytes) -> bool:
    """Whether one of `text` and `lead` starts with the other."""
    return lead.startswith(text[: len(lead)])


def _may_become_noise(partial: bytes) -> bool:
    """Whether a line's start, read so far without its newline, could end as noise."""
    if len(partial) > _LONGEST_LINE or b"\r" in partial:
        return False  # a progress bar redraws with "\r": show it now
    prefix = _ANY_PREFIX.match(partial)
    if prefix is None:
        bare = any(_agrees(partial, n.lead) for n in NOISE if n.source is None)
        return bare or _PARTIAL_PREFIX.fullmatch(partial) is not None
    return any(_agrees(partial[prefix.end() :], n.lead) for n in NOISE if n.source)


class _Filter:
    """Removes `NOISE` lines from a byte stream, passing everything else on at once."""

    def __init__(self) -> None:
        self.held = b""  # a line's start that could still become noise
        self._open = False  # a line's start was passed on: its rest is not a line start

    def feed(self, data: bytes) -> bytes:
        """The bytes of `data` (after what was held) that can be written now."""
        data, self.held, out = self.held + data, b"", []
        while data:
            end = data.find(b"\n") + 1
            if not end:
                if self._open or not _may_become_noise(data):
                    out.append(data)
                    self._open = True
                else:
                    self.held = data
                break
            line, data = data[:end], data[end:]
            glued = _GLUED.search(line.removesuffix(b"\n"))
            if glued is not None:  # alone, or after a progress bar: the bar's line goes on
                out.append(line[: glued.start()])
                self._open = self._open or glued.start() > 0
                continue
            if self._open or not is_noise(line):
                out.append(line)
            self._open = False
        return b"".join(out)

    def close(self) -> bytes:
        """What is still held, at the end of the stream."""
        held, self.held = self.held, b""
        return b"" if is_noise(held) else held


def _serve() -> None:
    """The filter process: stdin (pipe or pty) to stderr (the real one), until end of file."""
    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C is for the command, not for us
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    if os.isatty(0):  # the terminal was resized: so is the command's pty
        signal.signal(signal.SIGWINCH, lambda *_: _copy_size(2, 0))
    stream: _Filter | None = _Filter()
    with contextlib.suppress(OSError):  # stderr closed: the command gets EPIPE, as without us
        while data := _read(0):
            if stream is not None:
                pending = stream.held + data
                try:
                    data = stream.feed(data)
                except Exception:  # a bug here must not hide the command's output: copy it
                    stream, data = None, pending
            _write_all(data)
        _write_all(stream.close() if stream is not None else b"")


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 16)
    except OSError as error:
        if error.errno == errno.EIO:  # a pty whose last writer has closed it: end of file
            return b""
        raise


def _write_all(data: bytes) -> None:
    while data:
        data = data[os.write(2, data) :]


def _copy_size(source: int, target: int) -> None:
    import fcntl  # POSIX only, like the ptys this is used for
    import termios

    with contextlib.suppress(OSError):
        size = fcntl.ioctl(source, termios.TIOCGWINSZ, bytes(8))
        fcntl.ioctl(target, termios.TIOCSWINSZ, size)


def _channel(real_stderr: int) -> tuple[int, int]:
    """`(read end, write end)` for the command's output to reach the filter.

    A pty when stderr is a terminal, so the command still sees one (`isatty`, its width
    for progress bars), with its output left as written (no "\\n" -> "\\r\\n": the
    real terminal does that); a pipe otherwise.
    """
    if not os.isatty(real_stderr):
        return os.pipe()
    import termios  # POSIX only

    master, slave = os.openpty()
    mode = termios.tcgetattr(slave)
    mode[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, mode)
    _copy_size(real_stderr, slave)
    os.set_inheritable(master, False)
    os.set_inheritable(slave, False)
    return master, slave


def _same_terminal(fd: int, other: int) -> bool:
    return os.isatty(fd) and os.isatty(other) and os.fstat(fd).st_rdev == os.fstat(other).st_rdev


_STATE: dict[str, Any] = {}  # the running filter: set once per process


def quiet_tensorflow(*, verbose: bool = False) -> None:
    """Keep TensorFlow's start-up notices off stderr; call before TensorFlow is imported.

    Sets `TF_CPP_MIN_LOG_LEVEL` to "1" unless the user set it, and routes file descriptor 2
    through a filter process (`python -I -S` running this file) that drops the `NOISE`
    lines and passes every other byte on as it comes: a partial line is held only while it
    could still become a noise line, so progress bars are not delayed. The filter ignores
    SIGINT and SIGTERM and exits at end of file: output written before a crash (an abort,
    SIGKILL) still reaches the terminal. At a normal exit fd 2 is restored and the filter
    given a second to finish.

    When stderr is a terminal the command writes to a pty of the same size, so `isatty`
    and progress-bar widths stay as they were; when stdout is that same terminal it goes
    through the pty too, so the two keep their order (a progress bar's last line before the
    summary printed after it). A redirected stdout is never touched or held open.

    A second call, and any call where POSIX pipes are unavailable (Windows), only sets the
    environment.

    Args:
        verbose: keep everything: `TF_CPP_MIN_LOG_LEVEL=0` and no filter.
    """
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if _STATE or os.name != "posix" or not (sys.executable and os.path.isfile(__file__)):
        return
    _STATE["pid"] = os.getpid()
    try:
        real = {2: os.dup(2)}  # not inherited: only the filter and the exit handler use them
    except OSError:
        return  # no stderr at all
    try:
        read_end, write_end = _channel(real[2])
    except OSError:
        os.close(real[2])
        return  # no pty or pipe to be had: leave stderr alone
    if _same_terminal(1, real[2]):
        real[1] = os.dup(1)
    stop = {signal.SIGINT, signal.SIGTERM}
    # Blocked across the exec, so a Ctrl-C before the filter ignores them cannot kill it;
    # for this process they stay pending until the mask is restored, not lost.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    try:
        command = [sys.executable, "-I", "-S", os.path.abspath(__file__)]
        _STATE["filter"] = subprocess.Popen(
            command, stdin=read_end, stdout=subprocess.DEVNULL, stderr=real[2]
        )
    except OSError:
        for fd in (write_end, *real.values()):
            os.close(fd)
        return
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(read_end)
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
        if fd in real:
            stream.flush()
            os.dup2(write_end, fd)
    os.close(write_end)
    atexit.register(_restore, real)


def _restore(real: dict[int, int]) -> None:
    """At exit: fds 1 and 2 back to where they were, closing our end of the channel; let
    the filter write what it still holds before the shell's prompt."""
    if os.getpid() != _STATE["pid"]:
        return  # a forked child exiting: the filter is its parent's
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
        if fd in real:
            stream.flush()
            os.dup2(real[fd], fd)
    # A child process of ours that still holds the channel keeps the filter going after us.
    with contextlib.suppress(subprocess.TimeoutExpired):
        _STATE["filter"].wait(timeout=1.0)


def verbose_flag() -> argparse.ArgumentParser:
    """A parent parser (`add_parser(..., parents=[verbose_flag()])`) adding `--verbose`."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--verbose", action="store_true", help="TensorFlow's own log lines and INFO logging"
    )
    return parent


def start_cli(*, verbose: bool, console: bool) -> None:
    """What a console script does after parsing, before importing the command's code.

    Args:
        verbose: the `--verbose` flag: INFO logging and TensorFlow's own lines.
        console: the process is the console script (`main()` given no argv): quiet
            TensorFlow. False when `main([...])` runs inside another program (the tests),
            whose stderr and environment are left alone.
    """
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    if console:
        quiet_tensorflow(verbose=verbose)


def process_age_seconds() -> float | None:
    """Seconds since this process started (Linux: /proc), or None where that is unknown."""
    try:
        with open("/proc/self/stat", "rb") as stat, open("/proc/uptime", "rb") as uptime:
            # Field 22 is the start time in clock ticks after boot; the command name
            # (field 2, in parentheses) may itself hold spaces or ")".
            ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])
            since_boot = float(uptime.read().split()[0])
        return max(0.0, since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


if __name__ == "__main__":
    _serve()
