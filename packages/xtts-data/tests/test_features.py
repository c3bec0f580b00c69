"""The batched cache extractor gives each clip exactly what `mel_features` gives it alone."""

from __future__ import annotations

import numpy as np
import pytest

from xtts_audio import MelConfig, mel_features
from xtts_data._audio_io import min_samples
from xtts_data._features import MelExtractor


@pytest.mark.parametrize("preset", ["xtts", "coqui", "librosa", "tacotron2"])
def test_every_clip_matches_mel_features(preset):
    config = MelConfig.from_preset(preset)
    rng = np.random.default_rng(0)
    lengths = [min_samples(config), 1000, config.n_fft, 22050, 54321, 140000]
    clips = [0.1 * rng.standard_normal(n).astype(np.float32) for n in lengths]
    extractor = MelExtractor(config, block_frames=64, blocks=4)  # several calls per list
    for clip, features in zip(clips, extractor(clips), strict=True):
        expected = mel_features(clip, config).numpy()
        assert features.shape == expected.shape
        np.testing.assert_allclose(features, expected, atol=2e-5, rtol=1e-5)


def test_center_false_and_empty_list():
    config = MelConfig.from_preset("xtts", center=False)
    clip = np.sin(np.arange(5000, dtype=np.float32) * 0.01)
    (features,) = MelExtractor(config)([clip])
    np.testing.assert_allclose(features, mel_features(clip, config).numpy(), atol=2e-5)
    assert MelExtractor(config)([]) == []
