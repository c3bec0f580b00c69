"""Test corpus, settings and cache readers shared by the xtts-data tests (on `pythonpath`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile
import tensorflow as tf

from xtts_audio import MelConfig
from xtts_data import DataConfig, FeatureCache, record, write_demo_corpus

AUDIO = MelConfig.from_preset("xtts")
# Small shards so a tiny corpus still has several; short cond crops for short clips.
DATA = DataConfig(shard_size=8, batch_size=4, num_buckets=3, cond_frames=24, seed=0)

# Corpus rows that must be skipped, and the reason each must be reported with.
BAD_ROWS = {
    "missing": "missing audio file",
    "zero-bytes": "empty file",
    "truncated": "unreadable WAV",
    "garbage": "unreadable WAV",
    "codec": "unreadable audio",
    "emptytext": "empty text",
    "metadata.csv:": "malformed row: expected id|text|normalized_text[|speaker[|language]], "
    "received 1 field(s): 'just-one-field'",
    "../../etc/passwd": "path outside the corpus root",
    "silence-only-symbols": "no speakable text",
}


def _tone(seconds: float, rate: int, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    wave = 0.3 * np.sin(2 * np.pi * 220 * t) * np.hanning(len(t))
    return np.stack([wave, 0.5 * wave], axis=1) if channels == 2 else wave


# Good files in formats other than the corpus' own 16-bit 22050 Hz mono WAV.
OTHER_FORMATS = {
    "rate16k": dict(rate=16000, subtype="PCM_16", suffix=".wav"),
    "rate44k-stereo": dict(rate=44100, subtype="PCM_16", suffix=".wav", channels=2),
    "pcm24": dict(rate=22050, subtype="PCM_24", suffix=".wav"),
    "float32": dict(rate=22050, subtype="FLOAT", suffix=".wav"),
    "flac": dict(rate=24000, subtype="PCM_16", suffix=".flac"),
    "ogg": dict(rate=22050, subtype="VORBIS", suffix=".ogg"),
}


def write_test_corpus(root: Path, *, n: int = 40, speakers: int = 2) -> Path:
    """A demo corpus plus good files in other formats and one row per kind of bad row."""
    write_demo_corpus(root, n=n, speakers=speakers, min_seconds=0.4, max_seconds=1.6, seed=1)
    wavs = root / "wavs"
    rows = [line for line in (root / "metadata.csv").read_text().splitlines() if line]
    speaker = rows[0].split("|")[3] if speakers > 1 else None
    extra = []
    for uid, fmt in OTHER_FORMATS.items():
        wave = _tone(0.8, fmt["rate"], fmt.get("channels", 1))
        soundfile.write(wavs / f"{uid}{fmt['suffix']}", wave, fmt["rate"], subtype=fmt["subtype"])
        extra.append(f"{uid}|A tone in another format: {uid}.|")  # unique text: tokens find the row
    (wavs / "zero-bytes.wav").write_bytes(b"")
    (wavs / "truncated.wav").write_bytes((wavs / "rate16k.wav").read_bytes()[:200])
    (wavs / "garbage.wav").write_bytes(b"RIFF" + bytes(range(256)) * 4)
    (wavs / "codec.flac").write_bytes(b"fLaC" + b"\x00" * 100)
    soundfile.write(wavs / "silence-only-symbols.wav", _tone(0.5, 22050), 22050)  # text: emoji only
    extra += [
        "missing|This file does not exist.|",
        "zero-bytes|An empty file.|",
        "truncated|A truncated file.|",
        "garbage|Not audio at all.|",
        "codec|Broken FLAC.|",
        "emptytext| |",
        "just-one-field",
        "../../etc/passwd|Escape the corpus.|",
        "silence-only-symbols|\U0001f642\U0001f642|",
    ]
    if speaker:
        extra = [row + f"|{speaker}" if row.count("|") == 2 else row for row in extra]
    (root / "metadata.csv").write_text("\n".join(rows + extra) + "\n", encoding="utf-8")
    return root


def read_records(cache: Path) -> dict[str, dict]:
    """Every cached utterance by id: mel, tokens, speaker, split and audio (empty without
    `keep_audio`), read with the record format."""
    out = {}
    for path in FeatureCache.open(cache).shard_paths:
        for raw in tf.data.TFRecordDataset(str(path)):
            fields = record.decode(raw, AUDIO.n_mels)
            out[record.decode_id(raw, AUDIO.n_mels).numpy().decode()] = {
                "mel": fields["mel"].numpy(),
                "tokens": fields["tokens"].numpy(),
                "speaker": int(fields["speaker"]),
                "split": int(fields["split"]),
                "audio": fields["audio"].numpy(),
            }
    return out


# What `doctor --json` / `DoctorReport.to_dict` must always hold (the list).
REPORT_KEYS = frozenset(
    {
        "samples_per_s",
        "batch_ms_mean",
        "batch_ms_p99",
        "batch_ms_cv",
        "cpu_ms_per_sample",
        "frames_per_sample",
        "device_utilization",
        "padding_efficiency",
        "shapes",
        "python_ops",
    }
)


def espeak_speaks() -> bool:
    """espeak-ng can speak here: its program on PATH, or its library (the phonemes extra's
    wheel, or the system's)."""
    from xtts_data._demo_espeak import find_espeak
    from xtts_data.errors import XttsDataError

    try:
        find_espeak("en")
    except XttsDataError:
        return False
    return True
