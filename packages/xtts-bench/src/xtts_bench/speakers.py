"""Whose voice is it? A speaker measure fitted on recordings only, never on the model.

Each clip becomes a voice vector: the means and standard deviations of 20 MFCCs over its
frames within 40 dB of its loudest, and the mean and standard deviation of its log pitch
over its voiced frames (`librosa.yin`), 42 values. A `SpeakerMeasure` standardises them
over the recordings of the voices it knows and fits a logistic regression (scikit-learn)
on them; it then names the voice of any clip (`identify`) and scores two clips' likeness
as the cosine of their standardised vectors (`similarity`). Fitted on a corpus's held-out
voices, it judges a synthesis conditioned on one of their clips without ever having seen
the model (issue 31's speaker figures).

The vector may instead be a pretrained speaker encoder's embedding (`encoder="ge2e"`,
`ge2e_vector`): the GE2E encoder of Real-Time-Voice-Cloning (Wan et al. 2018), whose
weights ship in the `resemblyzer` wheel (the `ge2e` extra). It reads the audio, not
statistics a postfilter could set, so it checks the MFCC measure with a second opinion.
The classifier built on it is the same; its likeness is the embedding's own cosine.

`ground_truth` is its score on the recordings themselves: each clip identified by a
measure fitted on the other clips (leave-one-out), beside chance (1 / voices), and the
mean similarity of two recordings of the same voice and of two of different voices.
`score_syntheses` applies a measure fitted on every recording to `xtts-train evaluate
--reference-from ... --out DIR --json`'s syntheses: whether each is identified as its
reference clip's voice, and its similarity to that clip's recording.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import librosa
import numpy as np
from sklearn.linear_model import LogisticRegression

import xtts_data as xd
from xtts_bench.errors import SettingsError, import_extra
from xtts_bench.settings import SPEAKER_ENCODERS

__all__ = [
    "SpeakerMeasure",
    "format_speaker_table",
    "format_synthesis_table",
    "ge2e_vector",
    "ground_truth",
    "read_voices",
    "score_syntheses",
    "voice_vector",
]

_MFCC = 20
_TOP_DB = 40.0
_FMIN, _FMAX = 60.0, 500.0  # Hz: the pitch range of the voices measured (yin's search)
GE2E_HINT = 'pip install "xtts-bench[ge2e]" (resemblyzer, and the torch it runs on)'


def voice_vector(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """float64 [42]: MFCC means and deviations over the loud frames, log-pitch mean and
    deviation over the voiced ones (0, 0 for a clip with no voiced frame).

    Raises:
        SettingsError: an empty or silent clip.
    """
    audio = _sounding(audio)
    mfcc = librosa.feature.mfcc(y=audio, sr=sample_rate, n_mfcc=_MFCC)  # (20, frames)
    energy = librosa.feature.rms(y=audio)[0]  # (frames,)
    frames = min(mfcc.shape[1], energy.size)
    loud = energy[:frames] >= energy.max() * 10 ** (-_TOP_DB / 20)
    mfcc = mfcc[:, :frames][:, loud]
    f0 = librosa.yin(audio, fmin=_FMIN, fmax=_FMAX, sr=sample_rate)
    voiced = np.log(f0[(f0 > _FMIN * 1.05) & (f0 < _FMAX * 0.95)])
    pitch = [voiced.mean(), voiced.std()] if voiced.size else [0.0, 0.0]
    return np.concatenate([mfcc.mean(axis=1), mfcc.std(axis=1), pitch]).astype(np.float64)


def ge2e_vector(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """float64 [256]: the GE2E speaker encoder's embedding of the clip (resemblyzer's
    `VoiceEncoder` on the CPU, after its own preprocessing: 16 kHz, level normalised,
    pauses cut by webrtcvad).

    Raises:
        SettingsError: an empty or silent clip, or one with no speech left after the cut.
        MissingExtraError: the `ge2e` extra is not installed.
    """
    resemblyzer = import_extra("resemblyzer", hint=GE2E_HINT)
    speech = resemblyzer.preprocess_wav(_sounding(audio), source_sr=sample_rate)
    if speech.size == 0:
        raise SettingsError("Expected a clip with speech to embed, received none after "
                            "resemblyzer's voice activity cut")  # fmt: skip
    return _ge2e(resemblyzer).embed_utterance(speech).astype(np.float64)


def _vector_of(encoder: str) -> Callable[[np.ndarray, int], np.ndarray]:
    """The clip → voice vector of `encoder` (`settings.SPEAKER_ENCODERS`).

    Raises:
        SettingsError: an unknown encoder.
    """
    if encoder not in SPEAKER_ENCODERS:
        raise SettingsError(f"Expected an encoder of {SPEAKER_ENCODERS}, received: {encoder!r}")
    return {"mfcc": voice_vector, "ge2e": ge2e_vector}[encoder]


def _sounding(audio: np.ndarray) -> np.ndarray:
    """float32 audio, checked to hold sound (SettingsError: empty or silent)."""
    audio = np.asarray(audio, np.float32)
    if audio.size == 0 or not np.any(audio):
        raise SettingsError("Expected a clip with sound to measure its voice, received silence")
    return audio


@functools.cache
def _ge2e(resemblyzer):
    """The encoder, loaded once (its weights from the wheel)."""
    return resemblyzer.VoiceEncoder("cpu", verbose=False)


@dataclasses.dataclass
class SpeakerMeasure:
    """A voice classifier and likeness score fitted on recordings (see the module).

    Build with `SpeakerMeasure.fit({voice: [vector, ...]})`.
    """

    voices: list[str]
    mean: np.ndarray
    scale: np.ndarray
    classifier: LogisticRegression
    standardised_similarity: bool = True

    @classmethod
    def fit(cls, vectors: Mapping[str, Sequence[np.ndarray]], *,
            encoder: str = "mfcc") -> SpeakerMeasure:  # fmt: skip
        """Fitted on voice vectors (`encoder`'s) of at least two voices, at least one clip
        each. The classifier reads them standardised; so does the similarity of MFCC
        statistics, whose values have unrelated scales, while a GE2E embedding's is its
        own cosine, the one it was trained to score.

        Raises:
            SettingsError: fewer than two voices, or a voice without a clip; an unknown
                encoder.
        """
        _vector_of(encoder)
        if len(vectors) < 2 or any(len(v) == 0 for v in vectors.values()):
            counts = {voice: len(v) for voice, v in vectors.items()}
            raise SettingsError(f"Expected clips of at least two voices, received: {counts}")
        voices = sorted(vectors)
        x = np.stack([v for voice in voices for v in vectors[voice]])
        y = np.array([i for i, voice in enumerate(voices) for _ in vectors[voice]])
        mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-8
        classifier = LogisticRegression(max_iter=5000, C=1.0)
        classifier.fit((x - mean) / scale, y)
        return cls(voices, mean, scale, classifier, standardised_similarity=encoder == "mfcc")

    def identify(self, vector: np.ndarray) -> str:
        """The known voice `vector` is most likely."""
        return self.voices[int(self.classifier.predict(self._standard(vector)[None])[0])]

    def similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        """Cosine of two vectors (standardised over the recordings, for MFCC statistics):
        1 for the same voice vector, near 0 for unrelated ones."""
        if self.standardised_similarity:
            a, b = self._standard(a), self._standard(b)
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))

    def _standard(self, vector: np.ndarray) -> np.ndarray:
        return (np.asarray(vector, np.float64) - self.mean) / self.scale


def read_voices(corpus: str | Path, *, per_voice: int | None = None,
                encoder: str = "mfcc") -> dict[str, list[np.ndarray]]:  # fmt: skip
    """Voice vectors (`encoder`'s: `voice_vector` or `ge2e_vector`) of a corpus's
    recordings by speaker (`xtts_data.read_corpus` layouts), the first `per_voice` of
    each (all: None).

    Raises:
        SettingsError: a corpus without a speaker column, or with one speaker; an
            unknown encoder.
    """
    vector = _vector_of(encoder)
    rows = xd.read_corpus(corpus).rows
    by_voice: dict[str, list[str]] = {}
    for row in rows:
        by_voice.setdefault(row.speaker, []).append(str(row.audio))
    if len(by_voice) < 2:
        raise SettingsError(f"Expected a corpus of several speakers, received {corpus} with "
                            f"speakers {sorted(by_voice)}")  # fmt: skip
    vectors = {}
    for voice, paths in sorted(by_voice.items()):
        vectors[voice] = []
        for path in paths[:per_voice]:
            vectors[voice].append(vector(*_load(path)))
    return vectors


def score_syntheses(corpus: str | Path, report: Mapping, audio: str | Path, *,
                    vectors: Mapping[str, Sequence[np.ndarray]] | None = None,
                    encoder: str = "mfcc") -> dict:  # fmt: skip
    """Syntheses of `evaluate --json` (`report`, its rows naming `speaker`, `reference`
    and `reference_speaker` as indices into the corpus's sorted speakers), read from
    `audio/<id>.wav`, judged by a measure fitted on every recording of `corpus`
    (`vectors`: their `read_voices` with the same `encoder`, when already measured).

    Returns:
        `syntheses`, `top1` (identified as the reference's voice), `own_voice` (identified
        as the speaker's own, for swapped references), `similarity` (to the reference's
        recording, mean), `similarity_truth` (two recordings of one voice, mean),
        `confusion` ({reference's voice: {identified voice: syntheses}}), `vocoded_top1`
        (each recording's own mel through the same vocoder, `audio/<id>.truth.wav`,
        identified as its speaker; None without those files), `vocoded_similarity` (that
        vocoded recording's similarity to its reference clip's recording, mean over the
        rows whose clip is of their own voice: what a model that rendered the true mel
        would score through this vocoder; None without such rows), and `ground_truth`'s
        figures under `truth`.

    Raises:
        SettingsError: rows without a reference clip of the corpus (`--reference-from run`),
            or a synthesis missing from `audio`.
    """
    rows = xd.read_corpus(corpus).rows
    names = sorted({row.speaker for row in rows})
    paths = {row.id: str(row.audio) for row in rows}
    vector = _vector_of(encoder)
    vectors = read_voices(corpus, encoder=encoder) if vectors is None else vectors
    measure = SpeakerMeasure.fit(vectors, encoder=encoder)
    truth = ground_truth(vectors, encoder=encoder)
    hits, own, likeness, vocoded, vocoded_likeness = [], [], [], [], []
    confusion = {name: dict.fromkeys(names, 0) for name in names}
    for row in report["utterances"]:
        if row.get("reference_speaker") is None or row.get("reference") not in paths:
            raise SettingsError(f"Expected evaluate rows spoken with a clip of {corpus} "
                                f"(--reference-from same-speaker or other-speaker), "
                                f"received: reference={row.get('reference')!r}")  # fmt: skip
        synthesis = Path(audio) / f"{row['id']}.wav"
        if not synthesis.is_file():
            raise SettingsError(f"Expected the synthesis {synthesis} (evaluate --out), "
                                f"received none")  # fmt: skip
        measured = vector(*_load(synthesis))
        voice, reference = measure.identify(measured), names[row["reference_speaker"]]
        confusion[reference][voice] += 1
        hits.append(voice == reference)
        own.append(voice == names[row["speaker"]])
        clip = vector(*_load(paths[row["reference"]]))
        likeness.append(measure.similarity(measured, clip))
        recording = Path(audio) / f"{row['id']}.truth.wav"
        if recording.is_file():
            recorded = vector(*_load(recording))
            vocoded.append(measure.identify(recorded) == names[row["speaker"]])
            if row["reference_speaker"] == row["speaker"]:
                vocoded_likeness.append(measure.similarity(recorded, clip))
    return {"syntheses": len(hits), "top1": float(np.mean(hits)), "own_voice": float(np.mean(own)),
            "similarity": statistics.mean(likeness),
            "similarity_truth": truth["similarity_same"], "confusion": confusion,
            "vocoded_top1": float(np.mean(vocoded)) if vocoded else None,
            "vocoded_similarity": statistics.mean(vocoded_likeness) if vocoded_likeness else None,
            "truth": truth}  # fmt: skip


def _load(path: str | Path) -> tuple[np.ndarray, int]:
    audio, rate = librosa.load(path, sr=None, mono=True)
    return audio, int(rate)


def ground_truth(vectors: Mapping[str, Sequence[np.ndarray]], *, encoder: str = "mfcc") -> dict:
    """The measure on the recordings (their `encoder` vectors): leave-one-out top-1
    identification, chance, and the mean similarity of same-voice and of different-voice
    pairs.

    Raises:
        SettingsError: a voice with fewer than two clips (nothing left to fit on).
    """
    if any(len(v) < 2 for v in vectors.values()):
        counts = {voice: len(v) for voice, v in vectors.items()}
        raise SettingsError(f"Expected at least two clips of each voice, received: {counts}")
    hits, total = 0, 0
    for voice, clips in vectors.items():
        for i, clip in enumerate(clips):
            rest = {v: [c for j, c in enumerate(cs) if (v, j) != (voice, i)]
                    for v, cs in vectors.items()}  # fmt: skip
            hits += SpeakerMeasure.fit(rest, encoder=encoder).identify(clip) == voice
            total += 1
    measure = SpeakerMeasure.fit(vectors, encoder=encoder)
    same, other = [], []
    items = [(voice, clip) for voice, clips in vectors.items() for clip in clips]
    for i, (va, a) in enumerate(items):
        for vb, b in items[i + 1 :]:
            (same if va == vb else other).append(measure.similarity(a, b))
    return {"voices": len(vectors), "clips": total, "top1": hits / total,
            "chance": 1 / len(vectors), "similarity_same": statistics.mean(same),
            "similarity_other": statistics.mean(other)}  # fmt: skip


def format_speaker_table(result: dict) -> str:
    """One line per figure of `ground_truth`."""
    top1, chance = result["top1"], result["chance"]
    return "\n".join([
        f"voices {result['voices']}, clips {result['clips']}",
        f"top-1 identification (leave one out)  {top1:.1%}   chance {chance:.1%}",
        f"similarity, same voice                {result['similarity_same']:.3f}",
        f"similarity, different voices          {result['similarity_other']:.3f}",
    ])  # fmt: skip


def format_synthesis_table(result: dict) -> str:
    """`score_syntheses`' figures beside the recordings' own (ground truth) and chance,
    then which voice the syntheses of each reference's voice were identified as."""
    truth, vocoded, alike = result["truth"], result["vocoded_top1"], result["vocoded_similarity"]
    through = "" if vocoded is None else f"; through the same vocoder {vocoded:.1%}"
    vocoder = "" if alike is None else f"; a recording through the same vocoder: {alike:.3f}"
    voices = sorted(result["confusion"])
    lines = [
        format_speaker_table(truth),
        f"syntheses {result['syntheses']}: identified as the reference's voice "
        f"{result['top1']:.1%} (ground truth {truth['top1']:.1%}{through}, chance "
        f"{truth['chance']:.1%}); as the speaker's own {result['own_voice']:.1%}",
        f"similarity to the reference's recording {result['similarity']:.3f} "
        f"(two recordings of one voice: {result['similarity_truth']:.3f}{vocoder})",
        "reference's voice -> identified as: " + " ".join(f"{v:>8}" for v in voices),
    ]  # fmt: skip
    for reference, counts in sorted(result["confusion"].items()):
        lines.append(f"{reference:>34}: " + " ".join(f"{counts[v]:>8}" for v in voices))
    return "\n".join(lines)
