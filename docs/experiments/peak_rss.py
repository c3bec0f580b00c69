"""Peak resident memory of a command, and when it was reached (issue 30's breakdown).

Samples `/proc/PID/status` VmRSS every 0.25 s while COMMAND runs (Linux only) and prints one
JSON line: the peak in MB, the second it was reached, the wall time and a coarse trace. The
docs/train/memory.md ("What the fit's peak is made of") ran it as, e.g.:

    python docs/experiments/peak_rss.py graph -- xtts-train fit --data CACHE --workdir RUN \\
        --steps 20 --set train.eval_every=0 --no-compile-cache --quiet

usage: python docs/experiments/peak_rss.py LABEL -- COMMAND...
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            line = next(x for x in status if x.startswith("VmRSS"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) / 1024  # kB


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__.rsplit("usage: ", 1)[1])
    label, command = sys.argv[1], sys.argv[3:]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    peak, at, trace = 0.0, 0.0, []
    while process.poll() is None:
        rss, now = _rss_mb(process.pid), time.perf_counter() - start
        if rss is None:
            break
        trace.append((round(now, 1), round(rss)))
        if rss > peak:
            peak, at = rss, now
        time.sleep(0.25)
    process.wait()
    print(json.dumps({"label": label, "rc": process.returncode, "peak_mb": round(peak),
                      "peak_at_s": round(at, 1), "wall_s": round(time.perf_counter() - start, 1),
                      "trace": trace[::8]}))  # fmt: skip


if __name__ == "__main__":
    main()
