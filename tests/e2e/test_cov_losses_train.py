"""clip_cov / kl_cov (Cui et al. 2025) and vespo through the trainer on the tiny model: the covariance
tokens are chosen once per step from the pre-update log-probs, the loss acts on them, kl_cov trains rows
with zero advantage too, and a resumed run chooses the same tokens."""

from __future__ import annotations

import math

from test_async_rollouts import _interrupted_copy
from test_train_loop import _cfg, _stable

from reasonrl.trainer.loop import train

QUIET = lambda *a: None  # noqa: E731
# a random model earns no reward: DAPO's length penalty gives its samples different rewards
SHAPED = ("algo.shaping.overlong_buffer=10", "checkpoint.every=1")


def test_kl_cov_chooses_once_per_step_and_resumes_to_the_same_tokens(tiny_model_dir, tmp_path, monkeypatch):
    import reasonrl.trainer.loop as loop

    opts = ("algo.policy_loss=kl_cov", "algo.loss_kwargs={kl_cov_ratio: 0.05, kl_coef: 0.5}", *SHAPED)
    chosen, real = [], loop.attach_cov_selection
    inert = []

    def spy(batch, algo, seed):
        out = real(batch, algo, seed)
        n = int(batch.mask.sum())
        assert batch.old_logprobs is not None and not bool((batch.cov_select & ~batch.mask).any())
        chosen.append((int(batch.cov_select.sum()), max(1, math.floor(0.05 * n)), batch.cov_select.clone()))
        return out

    monkeypatch.setattr(loop, "attach_cov_selection", spy)
    monkeypatch.setattr(loop, "without_inert_rows", lambda b: inert.append(b) or b)
    hist = train(_cfg(tiny_model_dir, tmp_path / "a", 3, *opts), log=QUIET)["history"]
    assert len(chosen) == 3 and all(got == want for got, want, _ in chosen)  # once per step, before 4 updates
    assert inert == []  # kl_cov's penalty does not vanish with the advantage: no row is skipped
    for row, (n, _, _) in zip(hist[1:], chosen):
        assert row["actor/cov_selected_tokens"] == n and row["actor/cov_max"] > 0
        assert 0 < row["actor/cov_selected_frac"] < 0.2 and math.isfinite(row["loss/total"])
    # resumed after step 1: steps 2 and 3 choose the same tokens and log the same numbers
    whole = {r["step"]: _stable(r) for r in hist}
    first = [c for *_, c in chosen]
    chosen.clear()
    run_b = _interrupted_copy(tmp_path / "a", tmp_path / "b", after_step=1)
    resumed = {r["step"]: _stable(r) for r in train(_cfg(tiny_model_dir, run_b, 3, *opts), resume=True,
                                                    log=QUIET)["history"]}  # fmt: skip
    assert [c.tolist() for *_, c in chosen] == [c.tolist() for c in first[1:]]
    assert resumed[2] == whole[2] and resumed[3] == whole[3]


def test_clip_cov_and_vespo_train_and_change_the_update(tiny_model_dir, tmp_path):
    base = train(_cfg(tiny_model_dir, tmp_path / "ppo", 2, *SHAPED), log=QUIET)["history"]
    clip = train(_cfg(tiny_model_dir, tmp_path / "clip", 2, *SHAPED, "algo.policy_loss=clip_cov",
                      "algo.loss_kwargs={clip_cov_ratio: 0.2, clip_cov_lb: -100, clip_cov_ub: 100}"),
                 log=QUIET)["history"]  # fmt: skip
    # the same first rollouts; removing a fifth of the tokens' gradient changes the update
    assert clip[1]["reward/mean"] == base[1]["reward/mean"]
    assert clip[1]["actor/cov_selected_frac"] > 0.1 and clip[1]["loss/policy"] != base[1]["loss/policy"]
    vespo = train(_cfg(tiny_model_dir, tmp_path / "vespo", 2, *SHAPED, "algo.policy_loss=vespo"),
                  log=QUIET)["history"]  # fmt: skip
    assert 0.5 < vespo[1]["actor/phi_mean"] < 1.25  # near phi(1) = 1; the kernel never exceeds 1.24
    assert vespo[1]["reward/mean"] == base[1]["reward/mean"] and math.isfinite(vespo[2]["loss/total"])
    # with TIS the sampler weights go into vespo's ratio; the CPU sampler's log-probs are the trainer's to
    # ~1e-7, so the weights are ~1 and phi stays the plain run's (a wrong fold, e.g. the weights' log taken
    # twice or the weights summed instead of their logs, moves phi by far more)
    two = ("algo.policy_loss=vespo", "train.mini_batch=8")
    plain = train(_cfg(tiny_model_dir, tmp_path / "v2", 2, *SHAPED, *two), log=QUIET)["history"]
    tis = train(_cfg(tiny_model_dir, tmp_path / "vtis", 2, *SHAPED, *two, "algo.off_policy.tis_cap=2"),
                log=QUIET)["history"]  # fmt: skip
    assert tis[1]["rollout/logprob_gap_mean"] < 1e-5 and plain[1]["actor/phi_mean"] < 0.95
    assert abs(tis[1]["actor/phi_mean"] - plain[1]["actor/phi_mean"]) < 1e-5 and math.isfinite(
        tis[2]["loss/total"]
    )
