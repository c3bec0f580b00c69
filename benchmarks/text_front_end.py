"""Text normalisation speed, before and after the any-language front end, in one run.

Reproduce (from the repo root):

    hatch run python benchmarks/text_front_end.py [--n 200] [--rounds 5] [--before d341832]

"Before" is the text front end of commit `--before` (English-only cleaners, the
hand-written number reader), loaded from git into a private module; "after" is this
checkout's `read_transcripts` (the row's language's cleaners, num2words, the corpus
vocabulary). Both read the rows of the same English demo corpus, alternating, one thread;
the cache build (`prepare`, all cores) is timed on the same corpus for the share.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import xtts_audio as xa
import xtts_data as xd


def _old_front_end(commit: str, work: Path):
    """The `text` module of `commit`, importable beside this checkout's xtts_data."""
    package = work / "xtts_data_before"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("text.py", "_numbers.py"):
        source = subprocess.run(
            ["git", "show", f"{commit}:packages/xtts-data/src/xtts_data/{name}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        source = source.replace("from xtts_data._numbers", "from xtts_data_before._numbers")
        (package / name).write_text(source)
    sys.path.insert(0, str(work))
    return importlib.import_module("xtts_data_before.text")


def _rows_per_second(read, rows) -> float:
    started = time.perf_counter()
    read(rows)
    return len(rows) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="demo corpus utterances")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", default="d341832", help="commit of the old front end")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        old = _old_front_end(args.before, work)
        xd.write_demo_corpus(work / "corpus", n=args.n)
        rows = xd.read_corpus(work / "corpus").rows
        old_config = old.TextConfig()
        old_tokenizer = old.Tokenizer.from_config(old_config)

        def before(rows):  # what prepare did per row before
            return [old.text_to_ids(r.text, old_config, old_tokenizer) for r in rows]

        def after(rows):
            return xd.read_transcripts(rows, xd.TextConfig())

        figures = {"before": [], "after": []}
        for _ in range(args.rounds):
            figures["before"].append(_rows_per_second(before, rows))
            figures["after"].append(_rows_per_second(after, rows))
        audio, walls = xa.MelConfig.from_preset("xtts"), []
        for i in range(2):
            started = time.perf_counter()
            xd.prepare(work / "corpus", work / f"cache{i}", audio=audio, data=xd.DataConfig())
            walls.append(time.perf_counter() - started)
    before_rps, after_rps = (statistics.median(figures[k]) for k in ("before", "after"))
    wall = min(walls)
    print(f"rows {len(rows)}, rounds {args.rounds} (medians), {os.cpu_count()} cores")
    print(f"before ({args.before}): {before_rps:,.0f} rows/s")
    print(f"after  (this checkout): {after_rps:,.0f} rows/s ({after_rps / before_rps:.2f}x)")
    print(f"prepare wall {wall:.1f} s; text share {len(rows) / after_rps / wall:.2%}")


if __name__ == "__main__":
    main()
