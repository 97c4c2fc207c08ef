"""The KL coefficient across a run: fixed, or moved by the adaptive controller (`algo.kl.target` > 0).

Owns: the coefficient the next step folds into the rewards, its update from the step's measured KL, and
its state for checkpoints. Does not own: the formula (`algorithms.kl.adaptive_kl_coef`), the KL estimate
or the folding (`trainer.step.compute_advantages`, which calls `update` once per step).

As verl's AdaptiveKLController is driven (`apply_kl_penalty`): the step's rewards use the current
coefficient; then the KL it measured, the mean over the step's sequences (every rank's) of each
sequence's mean per-token KL(old || ref), moves the coefficient for the next step, with n = the number of
those sequences. The state is one float saved with the trainer state, so a resumed run goes on with it.
"""

from __future__ import annotations

from reasonrl.algorithms.kl import adaptive_kl_coef
from reasonrl.config import AlgoConfig


class KLControl:
    def __init__(self, algo: AlgoConfig):
        self.settings = algo.kl
        self.adaptive = algo.kl.target > 0
        self.coef = float(algo.kl.coef)

    def update(self, kl: float, sequences: int) -> None:
        """After a step whose `sequences` sequences had mean per-sequence KL `kl`."""
        if self.adaptive:
            s = self.settings
            self.coef = adaptive_kl_coef(self.coef, kl, s.target, s.horizon, sequences)

    def state_dict(self) -> dict:
        return {"coef": self.coef}

    def load_state_dict(self, state: dict | None) -> None:
        if state:
            self.coef = float(state["coef"])
