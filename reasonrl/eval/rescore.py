"""Samples whose verifier call failed, scored again when the same eval (or pass-rate run) runs again.

Owns: `failed_samples` (committed samples whose reason is a verifier error, "error: ...": the verifier
raised, its worker died, its service refused or kept failing; not "timeout", which is a score, as in
the trainer's `verifier_watch`) and `rescore_failed`, which scores those samples' completions again
with the eval's own verifiers and options (nothing is generated again) and rewrites samples.jsonl
atomically with the new scores. So a verifier service that was down during an eval (an LLM judge, a
remote sandbox) costs running the same command again once it is back, not a new eval; a resumed eval
does the same before it generates the chunks still to do. Does not own: the samples file's format
(`eval.samples`), generating (`eval.runner`).
"""

from __future__ import annotations

import json
from pathlib import Path

from reasonrl.data.files import write_text
from reasonrl.rewards.health import is_error, most_common_error


def failed_samples(samples: list[dict]) -> list[dict]:
    """The samples whose verifier call ended in an error rather than a score (`rewards.health.is_error`)."""
    return [s for s in samples if is_error(s.get("reason"))]


def common_error(samples: list[dict]) -> str:
    """The most common reason among failed samples, cut for one line ('' if none failed)."""
    return most_common_error(s.get("reason") for s in samples)


def rescore_failed(samples_path: Path, samples: list[dict], work, model: str, *, reward_options: dict | None,
                   plugins=(), workers: int | None = None, log=print) -> int:  # fmt: skip
    """Score the failed samples of `samples` (committed rows of `samples_path`, updated in place) again;
    returns how many were scored again. `work`: the eval's [(benchmark, problems, sampling)]."""
    from reasonrl.data.prompts import prompt_opens_think, scoring_text
    from reasonrl.models.loading import load_tokenizer_and_config
    from reasonrl.rewards.runner import RewardRunner, default_workers, preload_modules
    from reasonrl.rollout.environments import given_results, scored_problem
    from reasonrl.types import Completion

    problems = {name: ps for name, ps, _ in work}
    failed = [s for s in failed_samples(samples) if s["problem"] < len(problems.get(s["benchmark"], ()))]
    if not failed:
        return 0
    _, tokenizer, _ = load_tokenizer_and_config(model, log=lambda *a: None)
    ps = [problems[s["benchmark"]][s["problem"]] for s in failed]
    opens = {id(p): prompt_opens_think(tokenizer, p) for p in ps}
    texts = [scoring_text(s.get("answer_text", s["completion"]), opens[id(p)]) for s, p in zip(failed, ps)]
    with RewardRunner(workers=workers or default_workers(), options=reward_options, modules=plugins,
                      preload=preload_modules(ps)) as scorer:  # fmt: skip
        done = [
            Completion(
                [],
                "",
                [],
                env_reward=s.get("env_reward"),
                env_reason=s.get("env_reason", ""),
                tool_rewards=tuple(s.get("tool_rewards", ())),
                env_functions=s.get("env_functions"),
            )
            for s in failed
        ]
        given = given_results(done)  # an environment's reward, as the episode gave it
        ps = [scored_problem(p, c) for p, c in zip(ps, done)]  # (tool rewards, env_functions: as given)
        results, _ = scorer.score(texts, ps, **({"given": given} if any(given) else {}))
    for s, res in zip(failed, results):  # a sample's score is its correctness, as `sample_rows` writes it
        s.update(score=float(res.correctness), reason=res.info.get("reason"), extracted=res.extracted)
    _rewrite(samples_path, failed)
    still = failed_samples(failed)
    again = f", {len(still)} failed again (e.g. {common_error(still)!r})" if still else ""
    log(f"{samples_path}: scored again the {len(failed)} samples whose verifier call had failed: "
        f"{len(failed) - len(still)} scored{again}")  # fmt: skip
    return len(failed)


def _rewrite(path: Path, updated: list[dict]) -> None:
    """samples.jsonl with the rows of `updated` replaced (the same lines otherwise), atomically."""
    by_key = {(s["benchmark"], s["problem"], s["sample"]): s for s in updated}
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        row = json.loads(line)
        key = None if "committed" in row else (row["benchmark"], row["problem"], row["sample"])
        lines.append(json.dumps(by_key[key], default=str) + "\n" if key in by_key else line)
    write_text(path, "".join(lines))


__all__ = ["common_error", "failed_samples", "rescore_failed"]
