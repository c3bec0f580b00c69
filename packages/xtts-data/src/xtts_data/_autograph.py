"""The pipelines' tf.data functions traced as written, without AutoGraph.

tf.data runs AutoGraph on every function given to `map`, `filter`, `flat_map`,
`interleave` or `group_by_window` unless its caller's context turns it off: parsing and
rewriting each function's source, about 1.4 s of the first pipeline a process builds (2.4
-> 1.0 s for the micro model's training pipeline, measured), so of every command's start.
The functions use TensorFlow's ops and control flow explicitly, so the conversion changes
nothing they compute; a Python `if` on a tensor fails where the pipeline is built, where a
test sees it. TensorFlow has no public switch for tf.data's AutoGraph (`tf.function` has
`autograph=False`; `do_not_convert` wraps one function at a time, and the pipelines pass
nested ones), so this sets the context tf.data reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tensorflow.python.autograph.core import ag_ctx  # private: tf.data's AutoGraph switch

__all__ = ["off"]


@contextlib.contextmanager
def off() -> Iterator[None]:
    """Build tf.data pipelines inside: their functions are traced without AutoGraph."""
    with ag_ctx.ControlStatusCtx(status=ag_ctx.Status.DISABLED):
        yield
