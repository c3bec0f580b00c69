"""Starting a run from another run's weights (`fit --init-from RUN`, `train.init_from`).

The new run copies the weights of the source run's last checkpoint into its freshly built
model, and nothing else: its optimizer, step and schedule start at zero. The two models must
have the same weights, tensor for tensor and shape for shape, with one exception: a table
indexed by token id (the text embedding) is carried over token by token, so a vocabulary
that grew keeps every embedding it had and starts the new tokens from their initial values
(`xtts_data.Tokenizer.token_ids` names the tokens). Any other difference is refused before
the run compiles or writes anything, naming the tensor and both shapes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

import xtts_data as xd
from xtts_train.config import StackConfig
from xtts_train.errors import ConfigError
from xtts_train.runs.loading import latest_step, load_run_config, restore_weights
from xtts_train.training.task import Task

__all__ = ["InitSource", "StartFrom", "init_source"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class InitSource:
    """A run whose weights a new run starts from, checked to be usable.

    Attributes:
        path: the run folder.
        stack: its config (the task and model sizes it was trained with).
        step: its last checkpoint's step (the weights copied).
        tokenizer: its symbol table (None without a `tokenizer.json`).
    """

    path: Path
    stack: StackConfig
    step: int
    tokenizer: xd.Tokenizer | None


def init_source(path: str | Path, stack: StackConfig) -> InitSource:
    """The run `path` to start `stack`'s run from: a run of the same task, with a checkpoint.

    Raises:
        XttsTrainError: not a run folder, a run of another task, or no checkpoint yet.
    """
    path = Path(path)
    source = load_run_config(path, stack.train.task)
    step = latest_step(path)
    if step == 0:
        raise ConfigError(f"train.init_from: {path} has no checkpoint yet to start from")
    tokenizer = None  # what reads no text needs none (a run's token tables name theirs)
    if (path / "tokenizer.json").exists():
        text = (path / "tokenizer.json").read_text(encoding="utf-8")
        tokenizer = xd.Tokenizer.from_dict(json.loads(text))
    return InitSource(path, source, step, tokenizer)


class StartFrom:
    """The source run's weights, loaded into a model of its config and checked against a
    model of the new run's config before anything of the new run is built or written.

    Args:
        task: the run's task (the source's: `init_source` checked).
        stack: the new run's config (its model sizes).
        source: the run the weights come from (`init_source`).

    Raises:
        ConfigError: another number of weights, or a weight of another shape (naming it
            and both shapes); the token tables may differ in their first axis only.
    """

    def __init__(self, task: type[Task], stack: StackConfig, source: InitSource) -> None:
        self.source = source
        self.source_task = task.build(source.stack)  # `init_source` checked: the same task
        restore_weights(source.path, self.source_task.model, step=source.step)
        self._pairs(task.build(stack))  # the check, on a throwaway model

    def copy_into(self, task, tokenizer: xd.Tokenizer | None) -> None:
        """Copy the weights into `task.model` (built from the checked config): token
        tables row by row by token (`tokenizer`: the new run's symbols), the rest whole."""
        for name, their, our, by_token in self._pairs(task):
            value = their.numpy()
            if by_token:
                value = _token_rows(name, value, our.numpy(), self.source, tokenizer)
            our.assign(value)
        logger.info("started from %s, step %d (a fresh optimizer and schedule)",
                    self.source.path, self.source.step)  # fmt: skip

    def _pairs(self, task) -> list[tuple[str, Any, Any, bool]]:
        """(name, source weight, new weight, indexed by token) for every weight, both
        models' weights in their (same) creation order."""
        theirs, ours = self.source_task.model.weights, task.model.weights
        path = self.source.path
        if len(theirs) != len(ours):
            raise ConfigError(
                f"train.init_from: {path} holds a model of {len(theirs)} weights, this "
                f"run's has {len(ours)}: start from a run of the same model sizes"
            )
        tables = {id(v) for v in task.token_tables()}
        pairs = []
        for their, our in zip(theirs, ours, strict=True):
            name = _weight_name(our.path)
            by_token = id(our) in tables
            theirs_shape, ours_shape = tuple(their.shape), tuple(our.shape)
            compared = 1 if by_token else 0  # a token table's rows may differ in number
            if theirs_shape[compared:] != ours_shape[compared:]:
                raise ConfigError(
                    f"train.init_from: weight {name} is {theirs_shape} in {path}, "
                    f"{ours_shape} in this run: start from a run of the same model sizes"
                )
            pairs.append((name, their, our, by_token))
        return pairs


def _weight_name(path: str) -> str:
    """A weight's path without the model's name and the numbers Keras appends to make
    layer names unique in a process (`text_to_mel_1/text_encoder/embedding_9/embeddings`
    → `text_encoder/embedding/embeddings`): the same in every process."""
    return "/".join(re.sub(r"_\d+$", "", part) for part in path.split("/")[1:])


def _token_rows(name: str, theirs: np.ndarray, ours: np.ndarray, source: InitSource,
                tokenizer: xd.Tokenizer) -> np.ndarray:  # fmt: skip
    """`ours` (freshly initialised) with each token's row from `theirs` where the source
    vocabulary has that token."""
    old, new = source.tokenizer.token_ids(), tokenizer.token_ids()
    shared = [token for token in new if token in old]
    rows = ours.copy()
    rows[[new[t] for t in shared]] = theirs[[old[t] for t in shared]]
    fresh = len(new) - len(shared)
    if fresh:
        logger.info("%s: %d new tokens start from their initial embeddings", name, fresh)
    return rows
