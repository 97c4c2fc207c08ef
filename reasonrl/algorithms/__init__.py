"""Pure tensor functions of the RL update (rule 1 of the design guide): advantages, policy losses,
loss aggregation, KL estimators and shaping, log-probabilities and entropy, filters, importance
correction, value loss. No config objects, no I/O, no `torch.distributed`, no `.item()`. Global
normalisers are arguments. Does not own: the training loop that combines them (`trainer/loop.py`).
See docs/algorithms.md for formulas, papers and shapes.
"""

from reasonrl.algorithms.advantages import ADVANTAGES
from reasonrl.algorithms.correction import tis_weights
from reasonrl.algorithms.covariance import clip_cov, kl_cov  # noqa: F401  (registers them)
from reasonrl.algorithms.filters import (
    dynamic_sampling_mask,
    entropy_threshold,
    mask_truncated,
    minibatch_early_stop,
    overlong_penalty,
)
from reasonrl.algorithms.kl import fold_kl_into_rewards, kl_penalty
from reasonrl.algorithms.logprobs import entropy_from_logits, token_logprobs
from reasonrl.algorithms.losses import POLICY_LOSSES
from reasonrl.algorithms.masked import aggregate, masked_mean, normalisers
from reasonrl.algorithms.value import value_loss

__all__ = [
    "ADVANTAGES",
    "POLICY_LOSSES",
    "aggregate",
    "dynamic_sampling_mask",
    "entropy_from_logits",
    "entropy_threshold",
    "fold_kl_into_rewards",
    "kl_penalty",
    "mask_truncated",
    "masked_mean",
    "minibatch_early_stop",
    "normalisers",
    "overlong_penalty",
    "tis_weights",
    "token_logprobs",
    "value_loss",
]
