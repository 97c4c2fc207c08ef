"""The KL coefficient across a run: fixed, or moved by the adaptive controller (`algo.kl.target` > 0).

Owns: the coefficient the next step uses (folded into the rewards, or weighting the KL loss term), its
update from the step's measured KL, and its state for checkpoints. Does not own: the formula
(`algorithms.kl.adaptive_kl_coef`), the KL estimate, the folding (`trainer.step.compute_advantages`) or
the loss (`trainer.step.make_loss_fn`).

KL in the reward, as verl's AdaptiveKLController is driven (`apply_kl_penalty`): the step's rewards use
the current coefficient; then the KL it measured, the mean over the step's sequences (every rank's) of
each sequence's mean per-token KL(old || ref), moves the coefficient for the next step
(`compute_advantages` calls `update`). KL as a loss term, as OpenRLHF drives its controller with
`--algo.kl.use_loss`: the step's updates use the current coefficient; then the KL term they measured (the
step's mean `loss/kl`, aggregated as the loss aggregates it, over every rank) moves it (`after_updates`).
Either way n = the step's sequences. The state is one float saved with the trainer state, so a resumed
run goes on with it.
"""

from __future__ import annotations

from reasonrl import distributed as dist
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

    def after_updates(self, updates: list[dict], rows: int) -> dict[str, float]:
        """With the KL as a loss term: the step's mean `loss/kl` over its updates (this rank's `rows`
        sequences; summed over ranks, whose loss terms share the global normalisers) moves the
        coefficient; returns the coefficient those updates used as `actor/kl_coef`."""
        if not self.adaptive or self.settings.in_reward:
            return {}
        used = self.coef
        kls = [float(u["loss/kl"]) for u in updates if "loss/kl" in u]  # (early-stopped ones have none)
        total = dist.sum_over_ranks({"kl": sum(kls) / len(kls) if kls else 0.0, "rows": float(rows)})
        if kls:
            self.update(total["kl"], int(total["rows"]))
        return {"actor/kl_coef": used}

    def state_dict(self) -> dict:
        return {"coef": self.coef}

    def load_state_dict(self, state: dict | None) -> None:
        if state:
            self.coef = float(state["coef"])
