"""Prompt sampler with an exactly resumable position.

Owns: which problems each step trains on. Epoch e uses a permutation seeded by (seed, e); the state
is just (epoch, index), so a resumed run draws exactly the same prompts as an uninterrupted one.
Does not own: loading the problems (`data.schema`, `data.tasks`) or saving its state to disk
(the trainer puts `state_dict()` into the checkpoint).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from reasonrl.types import Problem


@dataclass
class SamplerState:
    epoch: int = 0
    index: int = 0


class PromptSampler:
    def __init__(self, problems: list[Problem], batch_size: int, seed: int = 0, shuffle: bool = True):
        if not problems:
            raise ValueError("the training set is empty")
        self.problems = problems
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.state = SamplerState()
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(len(self.problems)))
        if self.shuffle:
            random.Random(f"{self.seed}-{epoch}").shuffle(order)
        return order

    def next(self) -> list[Problem]:
        out = []
        while len(out) < self.batch_size:
            if self.state.index >= len(self._order):
                self.state = SamplerState(self.state.epoch + 1, 0)
                self._order = self._permutation(self.state.epoch)
            out.append(self.problems[self._order[self.state.index]])
            self.state.index += 1
        return out

    def observe(self, groups) -> None:  # the curriculum's hook (`data.mixture.MixtureSampler`)
        pass

    def metrics(self) -> dict[str, float]:
        return {}

    def bind(self, tokenizer) -> None:
        pass

    def state_dict(self) -> dict:
        return asdict(self.state)

    def load_state_dict(self, d: dict) -> None:
        self.state = SamplerState(**d)
        self._order = self._permutation(self.state.epoch)
