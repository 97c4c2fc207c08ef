"""Deduplication and decontamination of training data: `reasonrl data dedup` and
`reasonrl data decontaminate --against EVAL... / --benchmarks NAMES`.

Owns: the text a row is compared by (`problem_text`: the problem without the instructions our
converters append, so two problems never match on shared boilerplate), normalisation (lower case,
word tokens and arithmetic symbols), exact duplicates (a hash of the normalised text), near duplicates (MinHash
over word 3-gram shingles with LSH, `datasketch`; Jaccard estimate >= threshold), and n-gram
decontamination (open-r1's method: lower-cased word n-grams, n = 8; a training row is contaminated
when it shares at least `min_matches` n-grams with any evaluation row; texts shorter than n words are
one n-gram; an exact copy always counts). Both passes leave out each source's template (`frequent`:
the n-grams in more than a share of one source's rows), so problems of one generated task are
compared by what differs. `benchmark_overlap`: what `reasonrl train` warns about. In every pass the
first occurrence wins, in the order of the input files (Reasoning360). Every removal is reported with
its reason and what it matched. Does not own: reading / writing files (`data.files`), the CLI
(`cli.data`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reasonrl.data.prepare import prompts
from reasonrl.types import Problem

_WORD = re.compile(r"\w+|[-+*/^=<>%]", re.UNICODE)  # words, and the symbols that tell "3 + 3" from "3 / 3"
_INSTRUCTIONS = sorted(
    (v for k, v in vars(prompts).items() if k.isupper() and isinstance(v, str) and len(v) > 20),
    key=len,
    reverse=True,
)
# the columns an evaluation set in its source's own format keeps its problem in
EVAL_TEXT_FIELDS = (
    "problem",
    "question",
    "Question",
    "question_content",
    "prompt",
    "Problem",
    "puzzle",
    "text",
)


def problem_text(text: str) -> str:
    for ins in _INSTRUCTIONS:
        text = text.replace(ins, " ")
    return text


def normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def problem_row_text(p: Problem) -> str:
    """The problem text of a `Problem`: extra_info.original_question, else its non-system turns with
    every instruction from `prompts.py` removed."""
    extra = p.extra_info if isinstance(p.extra_info, dict) else {}
    if isinstance(extra.get("original_question"), str):
        return extra["original_question"]
    return problem_text(" ".join(str(m["content"]) for m in p.prompt if m.get("role") != "system"))


def row_text(row: dict, where: str) -> str:
    """The problem text of a verl row (its prompt's user turns, instructions removed; or
    extra_info.original_question) or of a source-format row (EVAL_TEXT_FIELDS)."""
    from reasonrl.data.schema import decode_guru_row
    from reasonrl.errors import InputError

    extra = row.get("extra_info")
    if isinstance(extra, dict) and isinstance(extra.get("original_question"), str):
        return extra["original_question"]
    if "reward_model" in row and row.get("data_source") is not None:
        return problem_row_text(Problem.from_row(decode_guru_row(row, where), where=where))
    for f in EVAL_TEXT_FIELDS:
        if isinstance(row.get(f), str) and row[f].strip():
            return problem_text(row[f])
    raise InputError(
        f"{where}: no problem text (a verl row, or one of the fields {', '.join(EVAL_TEXT_FIELDS)})"
    )


@dataclass
class Removal:
    index: int  # position in the combined input
    reason: str  # "exact", "near", "contaminated"
    detail: str

    def as_dict(self, where: str) -> dict[str, Any]:
        return {"row": where, "reason": self.reason, "detail": self.detail}


def exact_duplicates(texts: list[str], names: list[str]) -> list[Removal]:
    seen: dict[bytes, int] = {}
    out = []
    for i, t in enumerate(texts):
        key = hashlib.blake2b(normalise(t).encode(), digest_size=16).digest()
        if key in seen:
            out.append(Removal(i, "exact", f"same text as {names[seen[key]]}"))
        else:
            seen[key] = i
    return out


def shingles(text: str, k: int = 3) -> set[bytes]:
    words = normalise(text).split()
    if len(words) <= k:
        return {" ".join(words).encode()}
    return {" ".join(words[i : i + k]).encode() for i in range(len(words) - k + 1)}


TEMPLATE_MIN_ROWS = 3


def template_group(p: Problem) -> str:
    """The source whose template a row shares: its data_source, and its task where the row names one
    (reasoning-gym, LiveBench: one data_source, many tasks, each with its own instructions)."""
    task = p.extra_info.get("task") if isinstance(p.extra_info, dict) else None
    return f"{p.data_source}/{task}" if task else str(p.data_source)


def frequent(sets: list[set], groups: list[str], share: float) -> set:
    """The items in at least `share` of one group's sets (and in at least TEMPLATE_MIN_ROWS): the
    template a generated or templated source repeats in every row (`share` >= 1: none)."""
    from collections import Counter, defaultdict

    if share >= 1:
        return set()
    counts: dict[str, Counter] = defaultdict(Counter)
    sizes: Counter = Counter(groups)
    for items, g in zip(sets, groups):
        counts[g].update(items)
    out: set = set()
    for g, c in counts.items():
        floor = max(TEMPLATE_MIN_ROWS, share * sizes[g])
        out.update(item for item, k in c.items() if k >= floor)
    return out


def near_duplicates(texts: list[str], names: list[str], threshold: float = 0.8, num_perm: int = 128,
                    skip: Iterable[int] = (), groups: list[str] | None = None,
                    template_share: float = 0.05) -> list[Removal]:  # fmt: skip
    """Rows whose MinHash Jaccard estimate with an earlier kept row is >= threshold. With `groups` (the
    source of each row; `template_share` 1 turns this off), the shingles in more than that share of a group's
    rows are its template and left out, so two problems of one generated task are compared by what
    differs (without this, 155 of 300 distinct reasoning-gym word_sorting problems were "near
    duplicates" of each other by their shared instructions alone)."""
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError:
        from reasonrl.errors import InputError

        raise InputError(
            "near-duplicate removal needs the optional package: pip install 'reasonrl[data]'"
        ) from None
    skip = set(skip)
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    idx = [i for i in range(len(texts)) if i not in skip]
    sets = [shingles(texts[i]) for i in idx]
    template = frequent(sets, [groups[i] for i in idx], template_share) if groups else set()
    sets = [(s - template) or s for s in sets]  # a row of nothing but template keeps its own
    hashes = MinHash.bulk(sets, num_perm=num_perm, seed=1)
    kept: dict[int, Any] = {}
    out = []
    for i, mh in zip(idx, hashes):
        best = max(((mh.jaccard(kept[j]), j) for j in lsh.query(mh)), default=None)
        if best is not None and best[0] >= threshold:
            out.append(Removal(i, "near", f"Jaccard ~{best[0]:.2f} with {names[best[1]]}"))
        else:
            lsh.insert(i, mh)
            kept[i] = mh
    return out


def ngrams(text: str, n: int) -> set[int]:
    words = normalise(text).split()
    if len(words) < n:
        return {hash(" ".join(words))} if words else set()
    return {hash(" ".join(words[i : i + n])) for i in range(len(words) - n + 1)}


def template_ngrams(eval_texts: list[str], groups: list[str], n: int = 8, share: float = 0.05) -> set[int]:
    """The n-grams of each evaluation source's template (`frequent`). A generated or templated set
    (reasoning-gym, zebra puzzles, IFEval) repeats its instructions in every problem; a training row of
    the same task shares them without sharing any problem. `groups`: the source of each text (a file,
    a benchmark)."""
    return frequent([ngrams(t, n) for t in eval_texts], groups, share)


def content_ngrams(text: str, n: int, template: set[int] | frozenset) -> set[int]:
    """`ngrams(text, n)` less those that are mostly template: an n-gram counts only if more than half
    of its words (or all of the text's, where it has fewer) lie outside every template n-gram of the
    text, so "...return them as a list: Union", seven template words and the first word of a problem,
    does not tie two problems together. Plus the hash of the whole text: an exact copy always counts."""
    words = normalise(text).split()
    whole = {hash(" ".join(words))}
    if len(words) < n or not template:
        return ngrams(text, n) | whole
    grams = [hash(" ".join(words[i : i + n])) for i in range(len(words) - n + 1)]
    covered = [False] * len(words)
    for i, g in enumerate(grams):
        if g in template:
            covered[i : i + n] = [True] * n
    need = min(n // 2 + 1, covered.count(False))
    out = {g for i, g in enumerate(grams) if need and covered[i : i + n].count(False) >= need}
    return out | whole


def contaminated(texts: list[str], eval_texts: list[str], eval_names: list[str], n: int = 8,
                 min_matches: int = 1, template: set[int] | frozenset = frozenset()) -> list[Removal]:  # fmt: skip
    """Training rows sharing >= min_matches word n-grams with an evaluation row; with `template`
    (`template_ngrams`), only the evaluation rows' `content_ngrams` count."""
    index: dict[int, int] = {}
    for j, t in enumerate(eval_texts):
        for g in content_ngrams(t, n, template):
            index.setdefault(g, j)
    out = []
    for i, t in enumerate(texts):
        hits = [index[g] for g in ngrams(t, n) | {hash(normalise(t))} if g in index]
        if len(hits) >= min_matches:
            first = max(set(hits), key=hits.count)
            out.append(Removal(i, "contaminated", f"{len(hits)} shared {n}-grams with {eval_names[first]}"))
    return out


def benchmark_overlap(train: list[Problem], benchmarks: list[tuple[str, list[Problem]]], n: int = 8,
                      share: float = 0.05) -> dict[str, list[Removal]]:  # fmt: skip
    """{benchmark: the training rows contaminated by it} (`contaminated`, each benchmark's template
    left out): what `reasonrl train` warns about when val.benchmarks overlap its training data."""
    texts = [problem_row_text(p) for p in train]
    out = {}
    for name, problems in benchmarks:
        evals = [problem_row_text(p) for p in problems]
        names = [f"{name} problem {j} ({p.uid})" for j, p in enumerate(problems)]
        found = contaminated(
            texts, evals, names, n, template=template_ngrams(evals, [name] * len(evals), n, share)
        )
        if found:
            out[name] = found
    return out
