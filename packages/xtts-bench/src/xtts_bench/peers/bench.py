"""`xtts-bench peers`: xtts and its peers trained side by side, scored by one scorer.

```
corpus ── xtts-data prepare ─► xtts-cache ─┬─► xtts-train fit (core 0) ──► xtts-run/checkpoints
        └─ the cache's ids, audio, tokens ─┼─► glow train     (core 1) ──► glow/checkpoints
                                           └─► matcha train   (core 2) ──► matcha/checkpoints
              all started together, each stopped by SIGTERM after `minutes` of wall time
held-out ─► per scored checkpoint: xtts `evaluate` WAVs, each peer's `synthesize` WAVs
        ─► scoring.score_wavs (xtts preset mels, DTW, pairing, top-1) ─► peers.json, peers.png
```

The peers are `config.peers`: Glow-TTS (`xtts_bench.peers.glow`), Matcha-TTS
(`xtts_bench.peers.matcha`) or both, each a process with the same commands, manifest and
outputs. All systems read the same phoneme ids (xtts-data's front end; the peers get them
without `<eos>`), the same recordings (each computes its own features from them before
its clock starts, as a cache is built once) and synthesise the same held-out sentences,
each from its own features through the same Griffin-Lim (xtts-audio's, 32 iterations).
Each system's recordings through it (`ceiling`) show what the vocoder alone costs in
these measures.

With `long_form` corpora, each system's last checkpoint also speaks their first `n` items
(xtts as `evaluate` decodes, with its sentence splitting and without it; the peers whole),
and the same scorer groups them by the sentences they hold (`xtts_bench.long_form`):
`peers.json`'s `long_form`.

`peers.json` is written (atomically) after each system and each long-form corpus is
scored, with `"complete": false` until the last: an interrupted scoring keeps what it
scored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

import xtts_data as xd
from xtts_bench.errors import SettingsError
from xtts_bench.intelligibility import corpus_references, make_recogniser, transcribe
from xtts_bench.long_form import MODES, format_long_form, group_rows, hear, scored_rows
from xtts_bench.peers.launch import Trainer, check_cores, require_peers_extra, run_side_by_side
from xtts_bench.peers.scoring import score_wavs
from xtts_bench.settings import PeersBenchConfig
from xtts_data.files import write_json_atomic
from xtts_train import asr_available, evaluate, word_error_rate

__all__ = [
    "format_peers_table",
    "read_checkpoint_minutes",
    "run_peers_benchmark",
    "scored_checkpoints",
]

# The recogniser's word error rate of WAVs, one for each held-out sentence (None without it).
Wer = Callable[[list[Path]], float | None]

TRAINERS = "trainers.json"  # each system's checkpoints and their wall minutes
# Each peer's module (run as `python -m`) and its work folder under `out`.
PEER_MODULES = {"glow_tts": "xtts_bench.peers.glow", "matcha": "xtts_bench.peers.matcha"}
PEER_FOLDERS = {"glow_tts": "glow", "matcha": "matcha"}


def run_peers_benchmark(config: PeersBenchConfig, *, progress: bool = True) -> dict:
    """Train xtts and `config.peers` for `config.minutes`, score their checkpoints, write
    `peers.json` and `peers.png` into `config.out`; returns what `peers.json` holds.
    With `config.score_only`, score what an earlier training in `config.out` left.

    Raises:
        MissingExtraError: torch, coqui-tts (Glow-TTS) or matcha-tts is not installed.
        SettingsError: a core this process may not use, or an `out` that is not empty
            (with `config.score_only`: an `out` without `trainers.json`).
        RuntimeError: a trainer failed (its log's tail is in the message).
    """
    require_peers_extra(config.peers)
    out, stack = config.out, config.stack()
    if config.score_only:  # the finished run's checkpoints stay as its training left them
        found = read_checkpoint_minutes(out, config.peers)
        truth = _write_peer_manifests(config, stack)  # + any long-form items
    else:
        found, truth = _train(config, stack, progress=progress)
    result = {
        "settings": {
            **{k: str(v) for k, v in dataclasses.asdict(config).items()},
            "overrides": list(config.overrides),
            "xtts_settings": config.xtts_settings(),
        },
        "sentences": [u.id for u in truth],
        "chance_top1": 1.0 / len(truth),
        "complete": False,  # peers.json is rewritten as each part is scored
        "systems": {},
    }
    with held_out_wer(config, truth) as wer:  # one recogniser for every checkpoint
        result["systems"]["xtts"] = _score_xtts(config, stack, found["xtts"], truth, wer)
        write_json_atomic(out / "peers.json", result)
        for name in config.peers:
            result["systems"][name] = _score_peer(name, config, stack, found[name], truth,
                                                  wer)  # fmt: skip
            write_json_atomic(out / "peers.json", result)
    if config.long_form:
        result["long_form"] = {}
        for corpus, scored in _score_long_form(config, stack, found):
            result["long_form"][corpus] = scored
            write_json_atomic(out / "peers.json", result)
    result["complete"] = True
    write_json_atomic(out / "peers.json", result)
    plot_peers(result, out / "peers.png")
    return result


def _train(config: PeersBenchConfig, stack, *, progress: bool) -> tuple[dict, list]:
    """Prepare every system's features, train them side by side, write `trainers.json`.
    Returns each system's {step: wall minutes} and the held-out utterances."""
    check_cores(config.cores)
    out = config.out
    if out.exists() and any(out.iterdir()):
        raise SettingsError(f"Expected --out to be a new or empty folder, received: {out} "
                            f"(it holds files of another run; --score-only scores "
                            f"them)")  # fmt: skip
    xd.prepare(config.corpus, out / "xtts-cache", audio=stack.audio, data=stack.data,
               progress=progress)  # fmt: skip
    truth = _write_peer_manifests(config, stack)
    for name in config.peers:
        _peer(name, "prepare", out)
    trainers = [_xtts_trainer(config, out),
                *(_peer_trainer(name, core, config, out)
                  for name, core in zip(config.peers, config.cores[1:], strict=True))]  # fmt: skip
    run_side_by_side(trainers, config.minutes, progress=progress)
    found = {trainer.name: trainer.found for trainer in trainers}
    (out / TRAINERS).write_text(json.dumps(found, indent=1))
    return found, truth


def read_checkpoint_minutes(out: Path, peers: tuple[str, ...] = ("glow_tts",)
                            ) -> dict[str, dict[int, float]]:  # fmt: skip
    """xtts's and each of `peers`' {checkpoint step: wall minutes} as the training of
    `out` recorded them in `trainers.json`.

    Raises:
        SettingsError: `out` holds no `trainers.json` (its training did not finish), or
            one without a system of `peers` (it trained others).
    """
    path = out / TRAINERS
    if not path.is_file():
        raise SettingsError(f"Expected --out to hold a finished side-by-side training "
                            f"({path}), received: no such file")  # fmt: skip
    found = json.loads(path.read_text())
    missing = [name for name in ("xtts", *peers) if name not in found]
    if missing:
        raise SettingsError(f"Expected --out's training to hold {', '.join(missing)} "
                            f"({path}), received: {', '.join(found)}")  # fmt: skip
    return {name: {int(step): minutes for step, minutes in found[name].items()}
            for name in ("xtts", *peers)}  # fmt: skip


def scored_checkpoints(found: dict[int, float], every: float, last: float) -> list[int]:
    """The steps to score: for each multiple of `every` below `last` minutes (the budget),
    the checkpoint nearest it in wall minutes, and the last checkpoint (the one written
    when the budget ran out); ascending."""
    if not found:
        return []
    steps = sorted(found)
    marks = np.arange(every, last - 1e-9, every)
    chosen = {min(steps, key=lambda s: abs(found[s] - mark)) for mark in marks}
    return sorted(chosen | {steps[-1]})


def _write_peer_manifests(config: PeersBenchConfig, stack) -> list[xd.Utterance]:
    """`manifest.json` in each peer's work folder: its settings, the cache's utterances
    (ids, audio, token ids), the held-out ones and the long-form items. Returns the
    held-out utterances (xtts's truth)."""
    cache = _open_cache(config, stack)
    train = xd.read_utterances(cache, stack.data, "all", audio=stack.audio)
    held_out = _held_out(config, stack, cache)
    long_form = [_long_items(config, stack, cache, corpus) for corpus in config.long_form]
    settings = {
        "glow_tts": {"hidden": config.glow_hidden, "flows": config.glow_flows,
                     "encoder_layers": config.glow_encoder_layers,
                     "batch_size": config.glow_batch_size,
                     "learning_rate": config.glow_learning_rate,
                     "warmup_steps": config.glow_warmup_steps},
        "matcha": {"hidden": config.matcha_hidden,
                   "encoder_layers": config.matcha_encoder_layers,
                   "decoder_channels": config.matcha_decoder_channels,
                   "batch_size": config.matcha_batch_size,
                   "learning_rate": config.matcha_learning_rate},
    }  # fmt: skip

    def rows(corpus: Path, utterances: list[xd.Utterance]) -> list[dict[str, Any]]:
        # Each corpus's own ids: corpora may share them (every demo corpus counts from
        # DEMO001-0001), so a held-out id must never find a training clip's audio.
        audio = {row.id: Path(row.audio).absolute() for row in xd.read_corpus(corpus).rows}
        return [{"id": u.id, "audio": str(audio[u.id]), "tokens": _without_eos(u.tokens)}
                for u in utterances]  # fmt: skip

    shared = {"every_minutes": config.every_minutes, "seed": config.seed}
    utterances = {"vocab_size": cache.tokenizer.vocab_size,
                  "train": rows(config.corpus, train),
                  "held_out": rows(config.held_out, held_out),
                  "long_form": [rows(corpus, items)
                                for corpus, items in zip(config.long_form, long_form,
                                                         strict=True)]}  # fmt: skip
    for name in config.peers:
        work = config.out / PEER_FOLDERS[name]
        work.mkdir(parents=True, exist_ok=True)
        manifest = {"settings": {**settings[name], **shared}, **utterances}
        (work / "manifest.json").write_text(json.dumps(manifest))
    return held_out


def _open_cache(config: PeersBenchConfig, stack) -> xd.FeatureCache:
    return xd.FeatureCache.open(config.out / "xtts-cache", audio=stack.audio, data=stack.data)


def _held_out(config: PeersBenchConfig, stack, cache: xd.FeatureCache) -> list[xd.Utterance]:
    """The first `config.n` held-out utterances, read with the cache's tokenizer."""
    return _long_items(config, stack, cache, config.held_out)


def _long_items(config: PeersBenchConfig, stack, cache: xd.FeatureCache,
                corpus: Path) -> list[xd.Utterance]:  # fmt: skip
    """The first `config.n` items of a corpus neither system trains on (held-out or long
    form), read with the cache's tokenizer."""
    return xd.read_utterances(corpus, stack.data, "all", audio=stack.audio,
                              tokenizer=cache.tokenizer, limit=config.n)  # fmt: skip


def _without_eos(tokens: np.ndarray) -> list[int]:
    ids = [int(t) for t in tokens]
    return ids[:-1] if ids and ids[-1] == xd.Tokenizer.EOS else ids


def _peer(name: str, command: str, out: Path, *extra: str) -> None:
    """Run a peer's command (`PEER_MODULES[name]`) to completion on every core."""
    work = out / PEER_FOLDERS[name]
    done = subprocess.run([sys.executable, "-m", PEER_MODULES[name], command, "--work",
                           str(work), *extra], capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{name} {command} failed:\n{done.stderr[-4000:]}")


def _xtts_trainer(config: PeersBenchConfig, out: Path) -> Trainer:
    """`xtts-train fit` on the cache, with an empty compile cache of its own: a first run."""
    sets = [arg for s in config.xtts_settings() for arg in ("--set", s)]
    argv = ["-m", "xtts_train.cli", "fit", "--data", str(out / "xtts-cache"),
            "--workdir", str(out / "xtts-run"), "--quiet", *sets]  # fmt: skip
    return Trainer("xtts", argv, config.cores[0], out / "xtts-run" / "checkpoints",
                   r"ckpt-(\d+)\.index", out / "xtts.log",
                   env={"XTTS_COMPILE_CACHE": str(out / "xla-cache")})  # fmt: skip


def _peer_trainer(name: str, core: int, config: PeersBenchConfig, out: Path) -> Trainer:
    work = out / PEER_FOLDERS[name]
    argv = ["-m", PEER_MODULES[name], "train", "--work", str(work)]
    return Trainer(name, argv, core, work / "checkpoints", r"step-(\d+)\.pt",
                   out / f"{PEER_FOLDERS[name]}.log")  # fmt: skip


def _score_xtts(config: PeersBenchConfig, stack, found: dict[int, float],
                truth: list[xd.Utterance], wer: Wer) -> dict:  # fmt: skip
    """Each scored checkpoint's `evaluate` WAVs through the scorer (its own mel-domain
    pairing beside, as `pairing_mel`), and the recordings through its Griffin-Lim."""
    run, mels, trim = config.out / "xtts-run", [u.mel for u in truth], stack.data.trim_top_db
    points, wavs = [], config.out / "xtts-wavs"
    for step in scored_checkpoints(found, config.every_minutes, config.minutes):
        report = evaluate(run, config.held_out, split="all", n=config.n, step=step,
                          out=wavs / f"step-{step}")  # fmt: skip
        said = [wavs / f"step-{step}" / f"{u.id}.wav" for u in truth]
        scores = score_wavs(said, mels, stack.audio, trim_top_db=trim)
        points.append({"step": step, "minutes": found[step], **_summary(scores),
                       "wer": wer(said),
                       "pairing_mel": report.summary["pairing_mean"]})  # fmt: skip
    recordings = [wavs / f"step-{points[-1]['step']}" / f"{u.id}.truth.wav" for u in truth]
    ceiling = score_wavs(recordings, mels, stack.audio, trim_top_db=trim)
    ceiling["wer"] = wer(recordings)
    summary = json.loads((run / "summary.json").read_text())
    return _system(points, ceiling, summary)


def _score_peer(name: str, config: PeersBenchConfig, stack, found: dict[int, float],
                truth: list[xd.Utterance], wer: Wer) -> dict:  # fmt: skip
    """A peer's WAVs of each scored checkpoint (one `synthesize` process) scored."""
    work, mels = config.out / PEER_FOLDERS[name], [u.mel for u in truth]
    trim = stack.data.trim_top_db
    steps = scored_checkpoints(found, config.every_minutes, config.minutes)
    _peer(name, "synthesize", config.out, "--steps", ",".join(map(str, steps)), "--truth")
    points = []
    for step in steps:
        said = [work / "wavs" / f"step-{step}" / f"{u.id}.wav" for u in truth]
        scores = score_wavs(said, mels, stack.audio, trim_top_db=trim)
        points.append({"step": step, "minutes": found[step], **_summary(scores),
                       "wer": wer(said)})  # fmt: skip
    recordings = [work / "wavs" / "truth" / f"{u.id}.wav" for u in truth]
    ceiling = score_wavs(recordings, mels, stack.audio, trim_top_db=trim)
    ceiling["wer"] = wer(recordings)
    return _system(points, ceiling, json.loads((work / "summary.json").read_text()))


def _score_long_form(config: PeersBenchConfig, stack, found: dict[str, dict[int, float]]
                     ) -> Iterator[tuple[str, dict[str, dict]]]:  # fmt: skip
    """Each long-form corpus spoken by each system's last checkpoint and scored alike:
    `(corpus, {"xtts split" | "xtts whole" | peer: {"step", "groups"}})`, one corpus at
    a time."""
    cache, trim = _open_cache(config, stack), stack.data.trim_top_db
    xtts_step = max(found["xtts"])
    last = {name: max(found[name]) for name in config.peers}
    for name in config.peers:
        _peer(name, "synthesize", config.out, "--steps", str(last[name]), "--truth",
              "--long-form")  # fmt: skip
    for k, corpus in enumerate(config.long_form):
        truth = _long_items(config, stack, cache, corpus)
        ids, mels = [u.id for u in truth], [u.mel for u in truth]
        scored = {}
        for mode, overrides in MODES.items():
            wavs = config.out / "xtts-wavs" / f"long-{k}" / mode
            report = evaluate(config.out / "xtts-run", corpus, split="all", n=config.n,
                              step=xtts_step, out=wavs, overrides=list(overrides))  # fmt: skip
            own = {row["id"]: row for row in report.utterances}  # alignment, stop, pieces
            said = [wavs / f"{i}.wav" for i in ids]
            rows = [{**own[row["id"]], **row}
                    for row in scored_rows(corpus, ids, said, mels, stack.audio,
                                           trim_top_db=trim)]  # fmt: skip
            heard = hear(corpus, ids, said, [wavs / f"{i}.truth.wav" for i in ids], wavs)
            scored[f"xtts {mode}"] = {"step": xtts_step, "groups": group_rows(rows, heard)}
        for name in config.peers:
            wavs = config.out / PEER_FOLDERS[name] / "wavs" / f"long-{k}"
            spoken = [wavs / f"step-{last[name]}" / f"{i}.wav" for i in ids]
            rows = scored_rows(corpus, ids, spoken, mels, stack.audio, trim_top_db=trim)
            heard = hear(corpus, ids, spoken, [wavs / "truth" / f"{i}.wav" for i in ids],
                         wavs)  # fmt: skip
            scored[name] = {"step": last[name], "groups": group_rows(rows, heard)}
        yield str(corpus), scored


@contextlib.contextmanager
def held_out_wer(config: PeersBenchConfig, truth: list[xd.Utterance]) -> Iterator[Wer]:
    """A function of WAVs, one for each held-out sentence of `truth`, to the recogniser's
    word error rate against the sentences' words (pocketsphinx with a unigram over them, as
    `xtts-bench wer` and the demo hear). The recogniser is built once, on entry; without
    the `asr` extra the function returns None."""
    if not asr_available():
        yield lambda wavs: None
        return
    references = corpus_references(config.held_out, [u.id for u in truth])
    with tempfile.TemporaryDirectory(prefix="xtts-peers-wer-") as scratch:
        recogniser = make_recogniser(references, Path(scratch))
        yield lambda wavs: word_error_rate(references, [transcribe(recogniser, w)
                                                        for w in wavs])  # fmt: skip


def _summary(scores: dict) -> dict:
    return {k: scores[k] for k in ("pairing_mean", "distance_mean", "top1", "wer")
            if k in scores}  # fmt: skip


def _system(points: list[dict], ceiling: dict, summary: dict) -> dict:
    return {"points": points, "ceiling": _summary(ceiling), "steps": summary["steps"],
            "time_to_first_step_s": summary["time_to_first_step_s"],
            "step_ms_median": summary["step_ms_median"]}  # fmt: skip


def plot_peers(result: dict, path: Path) -> None:
    """Pairing, DTW distance and top-1 against wall minutes, one line per system; each
    system's recordings through the vocoder dashed in its colour."""
    figure = Figure(figsize=(12, 4))
    axes = figure.subplots(1, 3)
    panels = (("pairing_mean", "pairing score (1 = ignores the text)"),
              ("distance_mean", "DTW log-mel distance"),
              ("top1", "top-1 sentence identification"))  # fmt: skip
    for ax, (key, title) in zip(axes, panels, strict=True):
        for k, (name, system) in enumerate(result["systems"].items()):
            color = f"C{k}"
            points = system["points"]
            ax.plot([p["minutes"] for p in points], [p[key] for p in points], marker="o",
                    color=color, label=name)  # fmt: skip
            ax.axhline(system["ceiling"][key], color=color, linestyle="--", linewidth=0.8)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("wall minutes, one core each")
        ax.grid(alpha=0.3)
    axes[2].axhline(result["chance_top1"], color="grey", linestyle=":", linewidth=0.8)
    axes[0].legend(fontsize=8)
    figure.suptitle("dashed: the recordings through the same Griffin-Lim, from the system's "
                    "features; "
                    "dotted: chance", fontsize=8)  # fmt: skip
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def _or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_peers_table(result: dict) -> str:
    """One row per scored checkpoint of each system, then each system's figures."""
    head = (f"{'system':<10}{'step':>7}{'minutes':>9}{'pairing':>9}{'DTW':>7}{'top-1':>7}"
            f"{'WER':>7}")  # fmt: skip
    rows = [head]
    for name, system in result["systems"].items():
        rows += [
            f"{name:<10}{p['step']:>7}{p['minutes']:>9.1f}{p['pairing_mean']:>9.2f}"
            f"{p['distance_mean']:>7.2f}{p['top1']:>7.0%}{_or_dash(p.get('wer')):>7}"
            for p in system["points"]
        ]
        c = system["ceiling"]
        rows.append(f"{name:<10}{'(its GL)':>16}{c['pairing_mean']:>9.2f}"
                    f"{c['distance_mean']:>7.2f}{c['top1']:>7.0%}"
                    f"{_or_dash(c.get('wer')):>7}")  # fmt: skip
    rows.append(f"{len(result['sentences'])} held-out sentences, chance top-1 "
                f"{result['chance_top1']:.0%}; '(its GL)': the recordings through the "
                f"same Griffin-Lim from the system's features")  # fmt: skip
    for name, system in result["systems"].items():
        rows.append(f"{name}: {system['steps']} steps, time to first step "
                    f"{system['time_to_first_step_s']:.1f} s, {system['step_ms_median']:.0f} "
                    f"ms per step (median)")  # fmt: skip
    if "long_form" in result:
        rows += ["", "Long items, each system's last checkpoint (one scorer):",
                 format_long_form(result["long_form"])]  # fmt: skip
    return "\n".join(rows)
