"""Adaptive entropy control (Skywork-OR1, He et al. 2025, arXiv:2505.22312; TRL's use_adaptive_entropy).

Owns: the entropy coefficient of `algo.entropy_control` across a run: the coefficient each optimizer
update applies, its update from the update's measured entropy, and its state for checkpoints. Does not
own: the entropy term itself (`trainer.step.make_loss_fn`) or the entropy computation (`algorithms`).

After every optimizer update with mean entropy H (over the update's trained tokens, every rank's):
    coef <- min(coef + delta, coef_max)  if H <= target,   else  max(coef - delta, coef_min)
and an update applies the bonus coef * H only if the last measured H was at or below target (none was
measured before the first update: no bonus then), as Skywork-OR1 and TRL do. Without the control the
coefficient is algo.entropy_coef throughout. The state is a few floats saved with the trainer state, so
a resumed run continues with the same coefficient.
"""

from __future__ import annotations

from reasonrl.config import AlgoConfig


class EntropyControl:
    def __init__(self, algo: AlgoConfig):
        self.settings = algo.entropy_control
        self.enabled = self.settings.enabled
        self.coef = float(algo.entropy_coef)
        self.last_entropy: float | None = None  # none measured yet: no bonus

    def applied(self) -> float:
        """The coefficient the next update applies."""
        if not self.enabled:
            return self.coef
        below = self.last_entropy is not None and self.last_entropy <= self.settings.target
        return self.coef if below else 0.0

    def update(self, entropy: float) -> None:
        """After an update whose trained tokens had mean entropy `entropy`."""
        if not self.enabled:
            return
        s = self.settings
        if entropy <= s.target:
            self.coef = min(self.coef + s.delta, s.coef_max)
        else:
            self.coef = max(self.coef - s.delta, s.coef_min)
        self.last_entropy = float(entropy)

    def state_dict(self) -> dict:
        return {"coef": self.coef, "last_entropy": self.last_entropy}

    def load_state_dict(self, state: dict | None) -> None:
        if state:
            self.coef, self.last_entropy = float(state["coef"]), state["last_entropy"]
