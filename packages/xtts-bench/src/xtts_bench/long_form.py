"""Long text: does a run say all of it? Held-out items of several sentences (and sentences
longer than the training clips), scored by how many sentences they hold, with the run's
sentence splitting and without it.

A corpus of long items is a demo corpus of longer targets, e.g. 24 items of 7-13 s
(`xtts-data demo-corpus long24 --engine espeak --n 24 --seed 2 --min-seconds 7
--max-seconds 13`): its sentences are drawn like the training corpus's, none reused (its
own seed). Each item is decoded free-running by `xtts-train evaluate` (`--split all`),
twice: as the run decodes by default (`model.infer_split_symbols`: a text longer than that
is spoken as pieces) and with splitting off (`model.infer_split_symbols=0`: the model
alone). The rows are grouped by the number of sentences in their text
(`xtts_data.sentences.sentences`), and each group reports its share of duration ratios
within 0.85-1.15 (the issue's band), the median ratio, the mean alignment score and
pairing, and the share ended by the stop token.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xtts_data.sentences import sentences
from xtts_train import evaluate

__all__ = ["BAND", "MODES", "format_long_form", "group_rows", "score_long_form"]

BAND = (0.85, 1.15)  # a duration ratio within it: said all of it, at about the right pace
MODES = {"split": (), "whole": ("model.infer_split_symbols=0",)}


def score_long_form(run: Path, corpora: Sequence[Path], *, n: int, step: int | None = None,
                    progress: bool = False) -> dict[str, Any]:  # fmt: skip
    """Each corpus of long items scored at checkpoint `step` (None: the last), split and
    whole (`MODES`): `{corpus: {mode: {"groups": group_rows(...), "summary": ...}}}`."""
    result: dict[str, Any] = {}
    for corpus in corpora:
        result[str(corpus)] = {}
        for mode, overrides in MODES.items():
            report = evaluate(run, corpus, split="all", n=n, step=step, progress=progress,
                              overrides=list(overrides))  # fmt: skip
            result[str(corpus)][mode] = {"groups": group_rows(report.utterances),
                                         "summary": report.summary}  # fmt: skip
    return result


def group_rows(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """`evaluate` report rows grouped by the sentences in their text ("1", "2", ..., and
    "all"): n, `in_band` (share of duration ratios within `BAND`), `ratio_median`,
    `alignment_mean`, `pairing_mean`, `stopped_share`, `pieces_mean`."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(len(sentences(row["text"]))), []).append(row)
    groups = dict(sorted(groups.items(), key=lambda item: int(item[0])))
    groups["all"] = list(rows)
    return {name: _figures(members) for name, members in groups.items()}


def _figures(rows: list[dict[str, Any]]) -> dict[str, float]:
    ratios = [row["duration_ratio"] for row in rows]
    return {
        "n": len(rows),
        "in_band": sum(BAND[0] <= r <= BAND[1] for r in ratios) / len(rows),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "alignment_mean": statistics.fmean(row["alignment"] for row in rows),
        "pairing_mean": statistics.fmean(row["pairing"] for row in rows),
        "stopped_share": sum(bool(row["stopped"]) for row in rows) / len(rows),
        "pieces_mean": statistics.fmean(row.get("pieces", 1) for row in rows),
    }


def format_long_form(result: dict[str, Any]) -> str:
    """One row per corpus, mode and sentence count."""
    head = (f"{'corpus':<24}{'mode':<7}{'sent.':>6}{'n':>4}{'in band':>9}{'ratio':>7}"
            f"{'range':>13}{'align':>7}{'pair':>6}{'stop':>6}{'pieces':>8}")  # fmt: skip
    rows = [head]
    for corpus, modes in result.items():
        for mode, scored in modes.items():
            for name, g in scored["groups"].items():
                rows.append(
                    f"{Path(corpus).name[:23]:<24}{mode:<7}{name:>6}{g['n']:>4}"
                    f"{g['in_band']:>9.0%}{g['ratio_median']:>7.2f}"
                    f"{g['ratio_min']:>7.2f}-{g['ratio_max']:<5.2f}{g['alignment_mean']:>7.2f}"
                    f"{g['pairing_mean']:>6.2f}{g['stopped_share']:>6.0%}{g['pieces_mean']:>8.1f}"
                )  # fmt: skip
    rows.append(f"in band: duration ratio within {BAND[0]}-{BAND[1]}; split: the run's "
                f"model.infer_split_symbols; whole: model.infer_split_symbols=0")  # fmt: skip
    return "\n".join(rows)
