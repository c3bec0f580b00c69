"""xtts_bench.peers: xtts and its peers, Glow-TTS (coqui-tts) and Matcha-TTS (matcha-tts),
trained side by side, one core each, for the same wall minutes, scored by one scorer
(`xtts-bench peers`).

`bench` runs it (prepare, train them all, score, write `peers.json` and `peers.png`);
`glow` and `matcha` are the peers' sides, each a process of its own in the `peers`
environment, over `loop` (their command line and training loop, torch only); `launch`
starts, pins, watches and stops the trainers; `scoring` turns WAV files into pairing,
DTW distance and top-1 sentence identification.

Names load on first use: importing this package imports neither TensorFlow nor torch.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_bench.peers.bench import (
        format_peers_table,
        read_checkpoint_minutes,
        run_peers_benchmark,
        scored_checkpoints,
    )
    from xtts_bench.peers.launch import require_peers_extra
    from xtts_bench.peers.scoring import score_mels, score_wavs, wav_mels

__all__ = [
    "format_peers_table",
    "read_checkpoint_minutes",
    "require_peers_extra",
    "run_peers_benchmark",
    "score_mels",
    "score_wavs",
    "scored_checkpoints",
    "wav_mels",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["format_peers_table", "read_checkpoint_minutes", "run_peers_benchmark",
                         "scored_checkpoints"], "bench"),
        "require_peers_extra": "launch",
        **dict.fromkeys(["score_mels", "score_wavs", "wav_mels"], "scoring"),
    },
)  # fmt: skip
