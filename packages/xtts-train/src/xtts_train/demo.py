"""`xtts-train demo`: the whole stack on a CPU in a few minutes.

demo corpus (xtts-data) → feature cache → tiny model trained with one compiled step per
batch shape → free-running evaluation on sentences it never saw → a synthesized sentence
beside its ground truth; then a closing summary of what happened.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tqdm

import xtts_audio as xa
import xtts_data as xd
from xtts_train.compile.process import StartupClock, format_startup
from xtts_train.compile.warmup import cache_use
from xtts_train.config import StackConfig, load_stack_config
from xtts_train.errors import ConfigError
from xtts_train.evaluation.held_out import evaluate
from xtts_train.evaluation.scores import dtw_distance
from xtts_train.inference.vocoding import check_vocoder
from xtts_train.synthesize import synthesize
from xtts_train.tasks.registry import fit

__all__ = ["DEMO_SETTINGS", "DEMO_TEXT", "run_demo"]

DEMO_TEXT = "Dr. Ray was quiet."  # within the corpus's lengths (0.4–1.6 s), "Dr." read out

# Short utterances and two buckets: the compiles and steps fit a CPU. Silence trimmed
# (the demo corpus pads utterances with silence of random length, which no stop token
# can predict); two frames per decoder step (measured: docs/train/learning.md). No
# evals inside the run: the demo speaks and scores its unseen sentences at the end.
DEMO_SETTINGS = (
    "data.batch_size=8", "data.num_buckets=2", "data.cond_frames=32", "data.val_fraction=0.0",
    "data.trim_top_db=40", "model.reduction_factor=2", "train.warmup_steps=10",
    "train.learning_rate=0.002", "train.log_every=10", "train.checkpoint_every=50",
    "train.eval_every=0",
)  # fmt: skip

_SECONDS = dict(min_seconds=0.4, max_seconds=1.6)  # the demo corpus's utterance lengths
_UTTERANCES = 96  # the demo corpus's size
_HELD_OUT = 8  # sentences of the demo language the run never sees, scored at the end


def run_demo(workdir: str | Path, *, steps: int = 600, utterances: int | None = None,
             overrides: Sequence[str] = (), vocoder: str | Path | None = None) -> str:  # fmt: skip
    """Run the demo in `workdir` (reusing a corpus or cache already there); returns the
    closing summary. `utterances` sizes a new corpus (None: 96); a corpus or cache reused
    must be of that size. `overrides` are `SECTION.KEY=VALUE` settings over
    `DEMO_SETTINGS`; `vocoder`, a vocoder run of the demo's audio settings, speaks instead
    of Griffin-Lim (both checked before anything is built)."""
    workdir = Path(workdir)
    started, clock = time.perf_counter(), StartupClock()
    # The demo language's eval sentences, recorded in the run's config.yaml: the demo runs
    # no evals (it scores held-out sentences at the end), a longer run on its cache with
    # `--config run/config.yaml --set train.eval_every=N` speaks them. Not in
    # DEMO_SETTINGS, whose items hold no spaces (the README expands them in a shell).
    sentences = f"text_to_mel.eval_sentences={json.dumps(list(xd.DEMO_SENTENCES))}"
    if any(item.replace(" ", "").startswith("train.steps=") for item in overrides):
        raise ConfigError("the demo's steps are --steps (steps=), received: --set train.steps")
    stack = load_stack_config(None, [*DEMO_SETTINGS, sentences, *overrides,
                                     f"train.steps={steps}"])  # fmt: skip
    corpus, cache, run = workdir / "corpus", workdir / "cache", workdir / "run"
    _check_reused_size(corpus, cache, utterances)
    if vocoder is not None:  # a misfit is refused before the corpus, cache and training
        check_vocoder(Path(vocoder), run, stack)
    held_out = workdir / "held-out"
    tqdm.tqdm.write(f"xtts-train demo: working in {workdir.resolve()}")  # progress lines
    with clock.part("data"):  # the corpus and cache count as the run's data start-up
        if not (corpus / "metadata.csv").exists():
            size = _UTTERANCES if utterances is None else utterances
            xd.write_demo_corpus(corpus, n=size, progress=True, **_SECONDS)
        if not xd.FeatureCache.is_cache(cache):
            result = xd.prepare(corpus, cache, audio=stack.audio, data=stack.data, progress=True)
            tqdm.tqdm.write(xd.format_summary(result))
    summary = fit(stack, cache, run, clock=clock)
    if not (held_out / "metadata.csv").exists():
        xd.write_demo_corpus(held_out, n=_HELD_OUT, seed=1, **_SECONDS)
    report = evaluate(run, held_out, split="all", out=run / "held-out", progress=True,
                      vocoder=vocoder)  # fmt: skip
    truth = _ground_truth(DEMO_TEXT, stack)
    speech = synthesize(run, DEMO_TEXT, run / "demo.wav", truth=truth, vocoder=vocoder)
    distance = dtw_distance(speech.mel, truth)
    losses = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
              if "loss" in json.loads(line)]  # fmt: skip
    scores = report.summary
    return "\n".join([
        "",
        f"corpus   {corpus}",
        f"cache    {cache}",
        f"run      {run} (metrics.jsonl, summary.json, tensorboard/, checkpoints/)",
        f"training {summary['steps']} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
        f"{summary['retraces_after_warmup']} retraces; step {summary['step_ms_median']:.0f} ms "
        f"median; input-bound {summary['input_bound_fraction']:.1%} of the time",
        f"start-up time to first step {format_startup(summary)}; {cache_use(summary['warm_up'])}",
        f"held-out {len(report.utterances)} sentences it never saw, spoken free-running: "
        f"median duration ratio {scores['duration_ratio_median']:.2f}, alignment "
        f"{scores['alignment_mean']:.2f}, pairing {scores['pairing_mean']:.2f} (1.0: ignores "
        f"the text), stop token in {scores['stopped_share']:.0%}; listen: {run / 'held-out'}",
        f"speech   {speech.wav} ({speech.seconds:.2f} s, "
        f"{'ended by its stop token' if speech.stopped else 'no stop token'}, alignment score "
        f"{speech.alignment:.2f}, DTW distance to the ground truth {distance:.2f}) and "
        f"{speech.png} (its mel and attention, the ground truth's mel); audio by "
        f"{'Griffin-Lim' if vocoder is None else f'the vocoder {vocoder}'}",
        f"total    {time.perf_counter() - started:.0f} s, peak RSS {summary['peak_rss_mb']:.0f} MB",
    ])  # fmt: skip


def _check_reused_size(corpus: Path, cache: Path, utterances: int | None) -> None:
    """A corpus (or, without one, a cache) already in the work dir is reused: an
    `utterances` it was not written with is refused rather than dropped."""
    if utterances is None:
        return
    if (corpus / "metadata.csv").exists():
        found = xd.read_corpus(corpus)
        where, size = corpus, len(found.rows) + len(found.skipped)
    elif xd.FeatureCache.is_cache(cache):
        counts = xd.FeatureCache.open(cache).manifest.counts
        where, size = cache, counts.ok + counts.skipped
    else:
        return
    if size != utterances:
        raise ConfigError(
            f"Expected --utterances to be the size of the demo corpus already in {where} "
            f"({size} utterances, reused), received: --utterances {utterances}; leave out "
            f"--utterances to reuse it, or give a new --workdir"
        )


def _ground_truth(text: str, stack: StackConfig) -> np.ndarray:
    """The demo engine speaking `text` (normalised as the model reads it), as features:
    float32 [frames, n_mels], trimmed as the cache is."""
    spoken = xd.normalize_text(text, stack.data.text)
    pcm = xd.speak_demo(spoken, sample_rate=stack.audio.sample_rate)
    wave = pcm.astype(np.float32) / 32768.0
    if stack.data.trim_top_db is not None:
        wave = xa.trim_silence(wave, top_db=stack.data.trim_top_db)
    return xa.mel_features(wave, stack.audio).numpy()
