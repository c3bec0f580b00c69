"""`decode.global_variance` without its hold, for measuring the hold on its own (issue 50).

The global-variance stage scales the decoded frames' cepstral deviations to the clip's and
then holds each channel within the levels the clip reaches (`frames.within_range`). The
hold has no switch of its own: this runs `xtts-train evaluate` with the stage's second half
replaced by the identity, so the same command line scores the stage with and without it.
A scratch experiment, not part of the decoding: its figures are in docs/train/vocoder.md
("Each decoding patch, two seeds").

usage: python docs/experiments/unheld_variance.py EVALUATE_ARGS...
"""

from __future__ import annotations

import sys

from xtts_train.cli import main
from xtts_train.models.text_to_mel import postfilters
from xtts_train.models.text_to_mel.frames import match_global_variance


def _unheld(self, mel, decoded):
    return match_global_variance(mel, decoded.real, decoded.cond_mel, decoded.clip_mask)


if __name__ == "__main__":
    postfilters.GlobalVariance.__call__ = _unheld
    sys.exit(main(["evaluate", *sys.argv[1:]]))
