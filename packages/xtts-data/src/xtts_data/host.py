"""What the machine offers, for every package that sizes something to it (the pipeline
keeping features in RAM, the trainer's memory checks). TensorFlow-free."""

from __future__ import annotations

import os

__all__ = ["physical_memory"]


def physical_memory() -> int:
    """Bytes of RAM of this machine."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
