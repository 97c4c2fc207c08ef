"""`algo.top_entropy_quantile` through the trainer on the tiny model: the step's tokens are picked once,
by the policy's entropy before the step's updates (the same forward gives the old log-probs), the
picked share is logged, the policy still learns, and 1.0 is the plain run to the last digit."""

from __future__ import annotations

import torch
from test_train_loop import _cfg, _stable

from reasonrl.trainer.loop import train


def test_high_entropy_token_training_picks_the_top_share_before_the_updates(
    tiny_model_dir, tmp_path, monkeypatch
):
    import reasonrl.trainer.loop as loop

    quiet = lambda *a: None  # noqa: E731
    # a random model earns no reward: DAPO's length penalty gives its samples different rewards, so
    # advantages are not all 0 and the policy-gradient term (the one the mask acts on) moves the policy
    shaped = ("algo.shaping.overlong_buffer=10", "checkpoint.every=0")
    picked, real = [], loop.attach_entropy_mask

    def spy(batch, entropy, quantile):
        out = real(batch, entropy, quantile)
        on, off = entropy[batch.pg_mask], entropy[batch.mask & ~batch.pg_mask]
        picked.append((quantile, batch.old_logprobs is not None, float(on.min()), float(off.max()),
                       int(batch.pg_mask.sum()), int(batch.mask.sum())))  # fmt: skip
        return out

    monkeypatch.setattr(loop, "attach_entropy_mask", spy)
    hist = train(_cfg(tiny_model_dir, tmp_path / "q", 2, "algo.top_entropy_quantile=0.2", *shaped),
                 log=quiet)["history"]  # fmt: skip
    assert len(picked) == 2  # once per step, before its 4 updates (2 epochs x 2 mini-batches)
    for quantile, has_old, lowest_on, highest_off, n_on, n_all in picked:
        assert quantile == 0.2 and has_old  # 2 epochs: the same forward gave the old log-probs
        assert lowest_on >= highest_off  # every picked token's entropy is at least every other's
        assert 0.2 * n_all <= n_on < 0.2 * n_all + 2
    for row, (*_, n_on, n_all) in zip(hist[1:], picked):
        assert row["actor/pg_token_frac"] == n_on / n_all and row["actor/entropy_threshold"] > 0
    monkeypatch.setattr(loop, "attach_entropy_mask", real)

    plain = train(_cfg(tiny_model_dir, tmp_path / "a", 2, *shaped), log=quiet)["history"]
    one = train(_cfg(tiny_model_dir, tmp_path / "b", 2, *shaped, "algo.top_entropy_quantile=1.0"),
                log=quiet)["history"]  # fmt: skip
    assert [_stable(r) for r in one] == [_stable(r) for r in plain]  # 1.0: no pass, no mask, the same run
    assert (
        plain[1]["loss/policy"] != 0 and hist[1]["loss/policy"] != plain[1]["loss/policy"]
    )  # a different update
    assert not any(torch.isnan(torch.tensor(r["loss/total"])) for r in hist[1:])
