"""`name_scoped`: a function's ops under a name scope of their own, so a profile of the
step (`xtts-bench profile`) can tell the loss terms and the update apart. Names only:
the ops are the same."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import tensorflow as tf

__all__ = ["name_scoped"]

F = TypeVar("F", bound=Callable)


def name_scoped(scope: str) -> Callable[[F], F]:
    """Decorate a function so its ops are built inside `tf.name_scope(scope)` (a second
    call in one graph gets `scope_1`, as TensorFlow uniquifies scopes)."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def scoped(*args, **kwargs):
            with tf.name_scope(scope):
                return function(*args, **kwargs)

        return scoped  # type: ignore[return-value]

    return decorate
