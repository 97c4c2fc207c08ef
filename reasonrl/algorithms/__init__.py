"""Pure tensor functions of the RL update (rule 1 of the design guide): advantages, policy losses,
loss aggregation, KL estimators, log-probabilities and entropy. No config objects, no I/O, no
`torch.distributed`, no `.item()`. Global normalisers are arguments.
"""

from reasonrl.algorithms.advantages import ADVANTAGES
from reasonrl.algorithms.losses import POLICY_LOSSES

__all__ = ["ADVANTAGES", "POLICY_LOSSES"]
