"""CRUXEval (`cruxeval-org/cruxeval`, split test, 800 rows): `id`, `code` (def f), `input`,
`output`. Option `mode`: "o" (predict the output, data_source `simulation__cruxeval-o`) or "i"
(predict an input, `simulation__cruxeval-i`); gold = {"functional": code}, checked by running the
completed assertion (the cruxeval verifier), with the gold output in `extra_info.reference`."""

from __future__ import annotations

from reasonrl.data.prepare import InputError, prompts, register, text
from reasonrl.types import Problem


@register("cruxeval", "cruxeval-org/cruxeval: id, code, input, output", mode="o")
def cruxeval(row: dict, ctx) -> Problem:
    mode = str(ctx.options["mode"]).lower().removeprefix("cruxeval-")
    if mode not in ("i", "o"):
        raise InputError(f"converter cruxeval: option mode must be 'i' or 'o', got {mode!r}")
    code, inp, out = text(row, "code"), text(row, "input"), text(row, "output")
    if mode == "o":
        body = f"{prompts.CRUXEVAL_O}\n\n{prompts.code_fence(code)}\n\n```python\nassert f({inp}) == ??\n```"
    else:
        body = f"{prompts.CRUXEVAL_I}\n\n{prompts.code_fence(code)}\n\n```python\nassert f(??) == {out}\n```"
    name = f"cruxeval-{mode}"
    cid = str(row.get("id") or ctx.index)
    extra = {"index": ctx.index, "reference": out, "dataset": name, "input": inp}
    return Problem(prompts.user(body), {"functional": code}, f"simulation__{name}", "simulation", extra,
                   uid=f"{name}/{cid}")  # fmt: skip
