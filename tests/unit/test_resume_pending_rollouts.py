"""trainer.state._pending_rollouts: which of an async checkpoint's pending rollouts a resumed rank
replays (its own, when the number of ranks is unchanged) and when they are dropped with a warning."""

from __future__ import annotations

from reasonrl.trainer.state import _pending_rollouts


def _pending(engine_state: dict, saved_world: int) -> tuple[list | None, list[str]]:
    said: list[str] = []
    return _pending_rollouts(engine_state, saved_world, said.append), said


def test_the_same_number_of_ranks_replays_this_ranks_own_batches_silently():
    # one process is rank 0 of 1: it takes the first rank's share, not another's
    assert _pending({"rollouts_by_rank": [["r0-a", "r0-b"]]}, 1) == (["r0-a", "r0-b"], [])
    # a checkpoint written before the per-rank layout holds one list
    assert _pending({"rollouts": ["old"]}, 1) == (["old"], [])
    assert _pending({}, 1) == (None, [])  # a synchronous run's checkpoint: nothing pending, no warning


def test_another_number_of_ranks_drops_them_and_says_the_resume_is_not_exact():
    for state in ({"rollouts_by_rank": [["a"], ["b"]]}, {"rollouts": ["old"]}):
        pending, said = _pending(state, 2)
        assert pending is None
        assert len(said) == 1 and "generated for 2 rank(s), this run has 1" in said[0]
        assert "not bit-exact" in said[0]
    assert _pending({"rollouts_by_rank": [[], []]}, 2)[0] is None
