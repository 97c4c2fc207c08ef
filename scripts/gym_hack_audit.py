"""Reward-hacking audit of reasoning-gym's scorers through our `reasoning_gym` verifier: for every
registered task, generate rows and score answers that solve nothing (empty, constants, True / False,
the question echoed, its best line echoed, long number lists, NaN and infinity spellings). Prints, per
task, the reference answer's mean score and the four best-scoring hacks; `!!` marks a task where a hack
that is not a plain constant (chance level on yes / no tasks is expected) scores >= 0.3 on average. What
it found is in docs/data.md; the non-finite answers are also checked by the conformance sweep in the
tests.

    python scripts/gym_hack_audit.py [--rows 12] [--seed 1] [--tasks a,b]
"""

from __future__ import annotations

import argparse
import json
import statistics

CONSTANTS = {
    "zero": "0",
    "one": "1",
    "minus_one": "-1",
    "true": "True",
    "false": "False",
    "yes": "Yes",
    "no": "No",
}


def hacks(question: str) -> dict[str, str]:
    lines = [ln for ln in question.splitlines() if ln.strip()]
    return {
        **CONSTANTS, "empty": "", "space": " ", "none": "None", "list": "[]", "dict": "{}", "star": "*",
        "a": "a", "A": "A", "question": question, "last_line": lines[-1] if lines else "",
        "counting": " ".join(str(i) for i in range(500)), "letters": " ".join("abcdefghijklmnopqrstuvwxyz"),
        "csv": ", ".join(str(i) for i in range(-50, 200)), "no_solution": "No solution", "impossible": "IMPOSSIBLE",
        "nan": "nan", "NaN": "NaN", "nan_complex": "nan+nani", "nan_paren": "(nan)", "inf": "inf", "-inf": "-inf",
        "Infinity": "Infinity", "overflow": "1e999", "-overflow": "-1e999", "inf_complex": "inf+infi",
    }  # fmt: skip


def question_lines(question: str) -> list[str]:
    """The question's lines, a list item's numbering ("1. ") dropped, at most 40 of them."""
    import re

    lines = [re.sub(r"^\s*\d+[.)]\s*", "", ln).strip(" .") for ln in question.splitlines()]
    return [ln for ln in lines if ln][:40]


def audit(rows: int, seed: int, tasks: list[str] | None) -> dict[str, dict]:
    import reasoning_gym
    from reasoning_gym.factory import DATASETS

    from reasonrl.data.gym import NOT_SWEPT
    from reasonrl.rewards.verifiers.gym import score_entry

    report = {}
    for task in sorted(tasks or DATASETS):
        if task in NOT_SWEPT:
            continue
        ds = reasoning_gym.create_dataset(task, size=rows, seed=seed)
        scores: dict[str, list[float]] = {}
        reference = []
        for i in range(rows):
            entry = json.loads(json.dumps(ds[i], default=str))  # as a parquet row carries it
            gold = entry["answer"]
            reference.append(score_entry(task, "" if gold is None else str(gold), dict(entry))[0])
            for name, text in hacks(entry["question"]).items():
                scores.setdefault(name, []).append(score_entry(task, text, json.loads(json.dumps(entry)))[0])
            # a policy that copies one line of the question (a premise, a listed item): the best line's score
            by_line = [
                score_entry(task, ln, json.loads(json.dumps(entry)))[0]
                for ln in question_lines(entry["question"])
            ]
            scores.setdefault("best_line", []).append(max(by_line, default=0.0))
        means = {k: round(statistics.mean(v), 3) for k, v in scores.items()}
        top = sorted(means.items(), key=lambda kv: -kv[1])[:4]
        flagged = [k for k, v in means.items() if v >= 0.3 and k not in CONSTANTS]
        report[task] = {"reference": round(statistics.mean(reference), 3), "top": top, "flagged": flagged}
        print(
            f"{'!!' if flagged else '  '} {task:28s} reference {report[task]['reference']:.2f}  {top}",
            flush=True,
        )
    return report


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tasks", default="", help="comma list (default: every registered task)")
    args = ap.parse_args(argv)
    report = audit(args.rows, args.seed, [t for t in args.tasks.split(",") if t] or None)
    flagged = {t: r["flagged"] for t, r in report.items() if r["flagged"]}
    print(json.dumps({"tasks": len(report), "flagged": flagged}))
    return report


if __name__ == "__main__":
    main()
