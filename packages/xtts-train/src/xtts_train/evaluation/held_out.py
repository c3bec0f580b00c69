"""`evaluate`: free-running synthesis of utterances the run never trained on, scored
against their ground truth.

Each utterance is decoded with the compiled `infer` (the stop token ends it), conditioned
on the run's reference clip, and compared with its recording: duration ratio, alignment
score, DTW log-mel distance, and the pairing score (`xtts_train.evaluation.scores`). An
utterance longer than `decode.split_symbols` symbols is decoded as pieces joined
with their pauses (`inference.long_form`), as `synthesize` speaks it. With
`out`, `<id>.wav` (synthesised) and `<id>.truth.wav` (the ground-truth mel through the
same vocoder run, else the same Griffin-Lim) are written side by side, so a person can
listen and a recogniser compare them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

import xtts_audio as xa
import xtts_data as xd
from xtts_train.errors import XttsTrainError
from xtts_train.evaluation.scores import dtw_distances, duration_ratio, pairing_scores
from xtts_train.inference.long_form import decode_rows, join_pieces
from xtts_train.inference.vocoding import Waveforms
from xtts_train.models.text_to_mel.decoding import (
    Decoded,
    Decoding,
    Encoded,
    buffer_frames,
    row_pieces,
)
from xtts_train.runs.loading import latest_step, load_reference, load_run, load_run_config
from xtts_train.runs.media import decoded_frames

__all__ = ["REFERENCE_FROM", "EvalReport", "evaluate", "voice_sources"]

_BATCH = 8  # utterances decoded together


@dataclasses.dataclass(frozen=True)
class EvalReport:
    """What `evaluate` measured.

    Attributes:
        run, data: the run and the evaluated cache or corpus.
        split: `"val"` (the run's held-out ids) or `"all"` (every row).
        step: the training step of the checkpoint.
        utterances: one dict per utterance: `id`, `text`, `frames` (decoded), `true_frames`,
            `stopped`, `duration_ratio`, `alignment`, `distance`, `pairing`, `identified`
            (its own recording is the nearest of all, by DTW distance), `pieces` (1
            unless its text was longer than `decode.split_symbols`: then its pieces
            were decoded alone and joined with their pauses, `inference.long_form`).
        max_frames: the decoding buffer (twice the longest truth, rounded up).
        settings: the `--set` overrides of the run's decoding settings it ran with.
    """

    run: Path
    data: Path
    split: str
    step: int
    utterances: list[dict[str, Any]]
    max_frames: int
    settings: list[str] = dataclasses.field(default_factory=list)

    @property
    def summary(self) -> dict[str, float]:
        """Medians of the duration ratio, means of the rest, the share that stopped and
        `top1`, the share identified as their own sentence (chance: 1 / utterances)."""
        column = {k: np.array([u[k] for u in self.utterances], float) for k in _SCORES}
        return {
            "duration_ratio_median": float(np.median(column["duration_ratio"])),
            "alignment_mean": float(column["alignment"].mean()),
            "distance_mean": float(column["distance"].mean()),
            "pairing_mean": float(column["pairing"].mean()),
            "stopped_share": float(np.mean([u["stopped"] for u in self.utterances])),
            "top1": float(np.mean([u["identified"] for u in self.utterances])),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"run": str(self.run), "data": str(self.data), "split": self.split,
                "step": self.step, "max_frames": self.max_frames, "settings": self.settings,
                "summary": self.summary,
                "utterances": self.utterances}  # fmt: skip

    def format(self) -> str:
        """A table of the utterances, then the summary."""
        head = f"{'id':<16}{'ratio':>7}{'align':>7}{'dist':>7}{'pair':>7}  stop  text"
        rows = [
            f"{u['id'][:15]:<16}{u['duration_ratio']:>7.2f}{u['alignment']:>7.2f}"
            f"{u['distance']:>7.2f}{u['pairing']:>7.2f}  {'yes ' if u['stopped'] else 'no  '}"
            f"  {u['text'][:40]}"
            for u in self.utterances
        ]
        s = self.summary
        tail = (
            f"{len(self.utterances)} utterances ({self.split}) of {self.data}, step {self.step}"
            f"{''.join(f', --set {o}' for o in self.settings)}: "
            f"median duration ratio {s['duration_ratio_median']:.2f}, alignment "
            f"{s['alignment_mean']:.2f}, distance {s['distance_mean']:.2f}, pairing "
            f"{s['pairing_mean']:.2f} (~1: ignores the text), top-1 {s['top1']:.0%} (chance "
            f"{1 / len(self.utterances):.0%}), stop token fired in {s['stopped_share']:.0%}"
        )
        return "\n".join([head, *rows, tail])


_SCORES = ("duration_ratio", "alignment", "distance", "pairing")


def evaluate(run: str | Path, data: str | Path, *, split: str = "val", n: int | None = None,
             out: str | Path | None = None, step: int | None = None,
             progress: bool = False, griffin_lim_iters: int = 32,
             vocoder: str | Path | None = None,
             reference_from: str = "run", overrides: Sequence[str] = ()) -> EvalReport:  # fmt: skip
    """Synthesise utterances of `data` free-running and score them against the truth.

    Args:
        run: the training run.
        data: a feature cache or corpus with the run's audio and text settings.
        split: `"val"`: the ids the run's `data.val_fraction` held out of training;
            `"all"`: every row (for a corpus the run never saw).
        n: the first `n` utterances by id (None: all of the split); at least 2.
        out: folder for `<id>.wav` and `<id>.truth.wav` (None: write nothing).
        step: the checkpoint of this step (None: the last).
        progress: a progress bar over the utterances' pieces (one each unless
            `decode.split_symbols` cuts a text), shown for more than one batch.
        griffin_lim_iters: Griffin-Lim iterations of the written audio.
        vocoder: a vocoder run trained on the run's audio settings, which writes the
            audio instead of Griffin-Lim (checked before anything is decoded).
        reference_from: the voice each utterance is spoken in (`REFERENCE_FROM`): `run`,
            the run's reference clip for all; `same-speaker`, the first
            `StackConfig.reference_frames` frames of the next utterance of its own
            speaker in the selection (a clip of its voice it is not reading);
            `other-speaker`, those of an utterance of the
            next speaker (the swapped-reference control). Each row records `speaker`,
            `reference` (an id, or `run`) and `reference_speaker` (None for `run`).
        overrides: `decode.KEY=VALUE` settings of the run's decoding (`--set`),
            recorded in the report.

    Raises:
        XttsTrainError: no checkpoint, nothing held out, fewer than 2 utterances, a
            vocoder without `out` or of other audio settings, an unknown `reference_from`,
            or a selection without the clips it asks for (a speaker with one utterance
            for `same-speaker`, one speaker for `other-speaker`), or an override of a
            setting other than `decode.*`.
        XttsDataError: a source with other audio or text settings, `n` above the split.
    """
    run, data = Path(run), Path(data)
    if reference_from not in REFERENCE_FROM:
        raise XttsTrainError(f"Expected reference_from one of {REFERENCE_FROM}, received: "
                             f"{reference_from!r}")  # fmt: skip
    if vocoder is not None and out is None:
        raise XttsTrainError("a vocoder writes the audio: pass an out folder with the vocoder")
    waveforms = None  # first: a vocoder of other audio settings is refused before loading
    if out is not None:
        waveforms = Waveforms(run, load_run_config(run, "text_to_mel"), vocoder=vocoder,
                              griffin_lim_iters=griffin_lim_iters)  # fmt: skip
    stack, model, tokenizer = load_run(run, step=step, overrides=overrides)
    if split == "val" and stack.data.val_fraction == 0:
        raise XttsTrainError(
            f"{run} held no utterances out of training (data.val_fraction=0): evaluate a "
            f"corpus it never saw with --split all"
        )
    utterances = xd.read_utterances(data, stack.data, split, audio=stack.audio,
                                    tokenizer=tokenizer, limit=n)  # fmt: skip
    if len(utterances) < 2:
        raise XttsTrainError(
            f"{data}: {len(utterances)} utterance(s) in split {split!r}; the pairing score "
            f"compares at least 2"
        )
    max_frames = buffer_frames(max(len(u.mel) for u in utterances))
    decoding = Decoding(model, decode=stack.decode, cond_frames=stack.reference_frames,
                        max_frames=max_frames, batch_size=min(_BATCH, len(utterances)),
                        compiler=stack.train.compiler)  # fmt: skip
    voices = voice_sources(utterances, reference_from)  # index of each row's clip, or None
    run_reference = load_reference(run, stack)
    references = [run_reference if j is None else utterances[j].mel for j in voices]
    pieces = [row_pieces(u.tokens, tokenizer, max_symbols=stack.decode.split_symbols)
              for u in utterances]  # fmt: skip
    decoded = decode_rows(decoding, [p.ids for row in pieces for p in row],
                          [references[i] for i, row in enumerate(pieces) for _ in row],
                          progress=progress, desc="evaluate")  # fmt: skip
    said = _said(pieces, decoded, stack.audio, max_frames)
    distances = np.array([dtw_distances(d.mel, [u.mel for u in utterances]) for d in said])
    pairing = pairing_scores(distances)
    rows = [
        {"id": u.id, "text": u.text, "frames": d.length, "true_frames": len(u.mel),
         "stopped": d.stopped, "duration_ratio": duration_ratio(d.length, len(u.mel)),
         "alignment": d.alignment, "distance": float(distances[i, i]),
         "pairing": float(pairing[i]), "identified": bool(distances[i].argmin() == i),
         "speaker": u.speaker,
         "reference": "run" if voices[i] is None else utterances[voices[i]].id,
         "reference_speaker": None if voices[i] is None else utterances[voices[i]].speaker,
         "pieces": len(pieces[i])}
        for i, (u, d) in enumerate(zip(utterances, said, strict=True))
    ]  # fmt: skip
    if out is not None:
        _write_audio(Path(out), utterances, said, waveforms)
    step = step if step is not None else latest_step(run)
    return EvalReport(run, data, split, step, rows, max_frames, list(overrides))


REFERENCE_FROM = ("run", "same-speaker", "other-speaker")


def voice_sources(utterances: Sequence[xd.Utterance], reference_from: str) -> list[int | None]:
    """For each utterance, the index of the utterance whose clip it is spoken with (None:
    the run's reference clip); see `evaluate`'s `reference_from`.

    Raises:
        XttsTrainError: a speaker with one utterance (`same-speaker`), or one speaker
            (`other-speaker`).
    """
    if reference_from == "run":
        return [None] * len(utterances)
    by_speaker: dict[int, list[int]] = {}
    for i, u in enumerate(utterances):
        by_speaker.setdefault(u.speaker, []).append(i)
    if reference_from == "same-speaker":
        lonely = [utterances[ids[0]].id for ids in by_speaker.values() if len(ids) < 2]
        if lonely:
            raise XttsTrainError(
                f"--reference-from same-speaker: the speakers of {lonely} have no other "
                f"utterance in the selection; select more (--n, --split all)"
            )
        mine = [by_speaker[u.speaker] for u in utterances]
        return [ids[(ids.index(i) + 1) % len(ids)] for i, ids in enumerate(mine)]
    speakers = sorted(by_speaker)
    if len(speakers) < 2:
        raise XttsTrainError(
            f"--reference-from other-speaker: the selection holds one speaker "
            f"({speakers[0]}); evaluate a corpus of several"
        )
    sources = []
    for i, u in enumerate(utterances):
        mine = by_speaker[u.speaker]
        theirs = by_speaker[speakers[(speakers.index(u.speaker) + 1) % len(speakers)]]
        sources.append(theirs[mine.index(i) % len(theirs)])
    return sources


class _Said(NamedTuple):
    """An utterance as decoded (its pieces joined): what is scored and what is heard."""

    mel: np.ndarray  # float32 [length, n_mels]: the decoded frames (pauses included)
    length: int
    stopped: bool
    alignment: float
    sound: np.ndarray  # float32 [frames, n_mels]: as `synthesize` turns it into audio


def _said(pieces: list[list[Encoded]], decoded: list[Decoded], audio: xa.MelConfig,
          max_frames: int) -> list[_Said]:  # fmt: skip
    """Each utterance's decoded pieces (`decoded`, in order) joined (`join_pieces`)."""
    said, rows = [], iter(decoded)
    for row in pieces:
        mine = [next(rows) for _ in row]
        scored = join_pieces(row, [d.mel for d in mine], mine, audio)
        heard = [d.buffer[: int(decoded_frames(d.length, len(p.ids), max_frames, audio))]
                 for p, d in zip(row, mine, strict=True)]  # fmt: skip
        sound = join_pieces(row, heard, mine, audio).features
        said.append(_Said(scored.features, len(scored.features), scored.stopped,
                          scored.alignment, sound))  # fmt: skip
    return said


def _write_audio(out: Path, utterances, said: list[_Said], waveforms: Waveforms) -> None:
    """`<id>.wav` (as `synthesize` writes it) and `<id>.truth.wav` for each utterance."""
    out.mkdir(parents=True, exist_ok=True)
    audio = waveforms.audio
    for u, d in zip(utterances, said, strict=True):
        for name, mel in ((f"{u.id}.wav", d.sound), (f"{u.id}.truth.wav", u.mel)):
            xa.write_wav(out / name, np.asarray(waveforms(mel)), audio.sample_rate)
