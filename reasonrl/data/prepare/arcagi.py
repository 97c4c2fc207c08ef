"""ARC-AGI (the fchollet/ARC-AGI and arcprize/ARC-AGI-2 repositories: one JSON file per task,
{"train": [{"input": grid, "output": grid}], "test": [...]}; pass the task files as inputs). Each
test pair becomes one problem: at most 6 training pairs shown as `Example i` then the test input,
answer inside <answer> tags. data_source `simulation__arcagi1` (option version=2:
`simulation__arcagi2`), as Reasoning360's router expects; gold = the output grid."""

from __future__ import annotations

from pathlib import Path

from reasonrl.data.prepare import RowError, need, prompts, register
from reasonrl.rewards.ground_truth import plain
from reasonrl.types import Problem


def _grid(x, field: str) -> list[list[int]]:
    g = plain(x)
    if (
        not isinstance(g, list)
        or not g
        or not all(isinstance(r, list) and all(isinstance(c, int) for c in r) for r in g)
    ):
        raise RowError(field, "must be a non-empty grid of integers")
    return g


@register("arcagi", "ARC-AGI task JSON files: {train: [{input, output}], test: [{input, output}]}", version=1)
def arcagi(row: dict, ctx) -> list[Problem]:
    train, test = plain(need(row, "train")), plain(need(row, "test"))
    if not isinstance(train, list) or not train:
        raise RowError("train", "must list example pairs")
    for field, pairs in (("train", train), ("test", test)):
        if isinstance(pairs, list) and not all(isinstance(p, dict) for p in pairs):
            raise RowError(field, "must list {input, output} pairs")
    examples = "\n\n".join(
        f"Example {i + 1}\nInput: {_grid(p.get('input'), f'train[{i}].input')}\n"
        f"Output: {_grid(p.get('output'), f'train[{i}].output')}"
        for i, p in enumerate(train[:6])
    )
    stem = Path(ctx.source).stem
    task = str(row.get("id") or row.get("task_id") or (stem if ctx.index == 0 else f"{stem}-{ctx.index}"))
    name = f"simulation__arcagi{int(ctx.options['version'])}"
    out = []
    for j, pair in enumerate(test if isinstance(test, list) else []):
        body = f"{prompts.ARC}\n\n{examples}\n\nTest input: {_grid(pair.get('input'), f'test[{j}].input')}"
        gold = _grid(pair.get("output"), f"test[{j}].output")
        out.append(Problem(prompts.user(body, prompts.ARC_ANSWER), gold, name, "reasoning",
                           {"index": ctx.index, "task": task, "test_index": j}, uid=f"arc/{task}/{j}"))  # fmt: skip
    if not out:
        raise RowError("test", "has no test pairs")
    return out
