"""Instruction-following verifier "ifeval" (Google IFEval instruction ids; Reasoning360 `ood__ifeval`).

Owns: one checker per verifiable instruction id (`CHECKERS`), written from the IFEval paper's
definitions (counts, keywords, letter frequency, JSON, titles, bullets, sections, postscripts,
placeholders, case, quotation, end phrase, commas, script-based language), reading the instruction
list from the row, and the all-instructions-pass score. Does not own: judging free-form quality.

Row formats accepted: Reasoning360 (`extra_info["instruction_id_list"]`, `ground_truth` = list of
kwargs dicts, one per instruction) and IFEval (`instruction_id_list` + `kwargs` in `ground_truth`
or `extra_info`, possibly JSON-encoded). Only the text after `</think>` is checked; an empty answer
follows nothing. `loose=True` also accepts the answer with its first / last line or `*` removed
(IFEval's "loose" accuracy). An unknown instruction id raises ValueError (a data error).
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.rewards.extract import answer_region
from reasonrl.rewards.ground_truth import decoded
from reasonrl.types import Problem

Checker = Callable[..., bool]
CHECKERS: dict[str, Checker] = {}


def checker(*ids: str) -> Callable[[Checker], Checker]:
    def deco(fn: Checker) -> Checker:
        for i in ids:
            CHECKERS[i] = fn
        return fn

    return deco


def _relation(count: int, n: Any, relation: str | None) -> bool:
    n = int(n)
    rel = (relation or "at least").strip().lower()
    if rel == "less than":
        return count < n
    if rel in ("at least", "at_least"):
        return count >= n
    if rel in ("at most", "at_most"):
        return count <= n
    if rel in ("exactly", "equal to"):
        return count == n
    raise ValueError(f"ifeval: unknown relation {relation!r}")


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


# abbreviations whose period ends no sentence (common English ones; IFEval's punkt model has its own)
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs inc ltd co corp jan feb apr jun jul aug sep sept oct nov dec tues wed "
    "thurs fri u.s u.k u.n u.s.a d.c a.m p.m ph.d m.d gen col lt sgt capt rep sen gov ave blvd ft mt ok "
    "bros messrs mg yr cos calif fla mass conn".split()
)
_SENTENCE_END = re.compile(r"([.!?]+)([\"'\u201d\u2019)\]]*)(\s+)(?=\S)")


def sentences(text: str) -> list[str]:
    """Sentences as IFEval's checker (nltk's punkt, English model) splits them, approximated without
    its model: after . ! ? (and closing quotes / brackets) and whitespace; not after an abbreviation,
    a single-letter initial, a number before a lowercase word ("1. one") or an ellipsis before one;
    never at a bare line break. Measured against punkt: 36 of 1,500 held-out paragraphs counted
    differently, against 79 with the previous splitter (tests/unit/test_conformance_ifeval.py)."""
    text = text.strip()
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        before = text[start : m.start(1)]
        if not before.strip():
            continue
        last = before.split()[-1].lower().lstrip("(\"'[*")
        punct, nxt = m.group(1), text[m.end() : m.end() + 1]
        if punct == ".":
            if last in ABBREVIATIONS or re.fullmatch(r"[a-z]", last):
                continue
            if last.isdigit() and nxt.islower():
                continue
        elif set(punct) == {"."} and nxt.islower():  # an ellipsis inside a sentence
            continue
        out.append(text[start : m.end(2)])
        start = m.end()
    out.append(text[start:])
    return [x for x in out if x.strip()]


_CONTRACTION = re.compile(r"(?i)(n't|'s|'re|'ve|'ll|'d|'m)$")
_EDGE = "\"'`([{<)]}>,;:!?.*_\u201c\u201d\u2018\u2019\u2026"


def word_tokens(text: str) -> list[str]:
    """Words as IFEval's checker counts capital words (nltk's `word_tokenize`), approximated without its
    model: split at whitespace, brackets, double quotes and "--"; punctuation cut from both ends;
    contractions split off ("DON'T" -> "DO", "N'T"); inner periods kept ("U.S.A")."""
    out = []
    for raw in re.split(r"[\s()\[\]{}<>\"\u201c\u201d`]+|--", text):
        w = raw.strip(_EDGE)
        if not w:
            continue
        m = _CONTRACTION.search(w)
        out += [w[: m.start()], w[m.start() :]] if m and m.start() > 0 else [w]
    return out


# ---------------------------------------------------------------- keywords


@checker("keywords:existence")
def keyword_existence(text: str, keywords: list[str]) -> bool:
    return all(re.search(rf"\b{re.escape(k)}\b", text, re.IGNORECASE) for k in keywords)


@checker("keywords:frequency")
def keyword_frequency(text: str, keyword: str, frequency: int, relation: str = "at least") -> bool:
    count = len(re.findall(rf"\b{re.escape(keyword)}\b", text, re.IGNORECASE))
    return _relation(count, frequency, relation)


@checker("keywords:forbidden_words")
def forbidden_words(text: str, forbidden_words: list[str]) -> bool:
    return not any(re.search(rf"\b{re.escape(w)}\b", text, re.IGNORECASE) for w in forbidden_words)


@checker("keywords:letter_frequency")
def letter_frequency(text: str, letter: str, let_frequency: int, let_relation: str = "at least") -> bool:
    return _relation(text.lower().count(letter.lower()), let_frequency, let_relation)


# ---------------------------------------------------------------- length


@checker("length_constraints:number_words")
def number_words(text: str, num_words: int, relation: str = "at least") -> bool:
    return _relation(len(words(text)), num_words, relation)


@checker("length_constraints:number_sentences")
def number_sentences(text: str, num_sentences: int, relation: str = "at least") -> bool:
    return _relation(len(sentences(text)), num_sentences, relation)


@checker("length_constraints:number_paragraphs")
def number_paragraphs(text: str, num_paragraphs: int) -> bool:
    """Paragraphs separated by the markdown divider `***`; none may be empty."""
    parts = re.split(r"\s?\*\*\*\s?", text.strip())
    if any(not p.strip() for p in parts[1:-1]):
        return False
    return len([p for p in parts if p.strip()]) == int(num_paragraphs)


@checker("length_constraints:nth_paragraph_first_word")
def nth_paragraph_first_word(text: str, num_paragraphs: int, nth_paragraph: int, first_word: str) -> bool:
    """Paragraphs separated by blank lines; the n-th (1-based) starts with `first_word`."""
    parts = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    n = int(nth_paragraph)
    if len(parts) != int(num_paragraphs) or not 1 <= n <= len(parts):
        return False
    first = re.match(r"\W*(\w+)", parts[n - 1])
    return first is not None and first.group(1).lower() == first_word.strip().lower()


# ---------------------------------------------------------------- content


@checker("detectable_content:number_placeholders")
def number_placeholders(text: str, num_placeholders: int) -> bool:
    return len(re.findall(r"\[[^\[\]\n]+\]", text)) >= int(num_placeholders)


@checker("detectable_content:postscript")
def postscript(text: str, postscript_marker: str = "P.S.") -> bool:
    marker = postscript_marker.strip()
    if marker.upper().replace(" ", "") == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker.upper().replace(" ", "") == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + re.escape(marker.lower()) + r".*$"
    return re.search(pattern, text.lower(), re.MULTILINE) is not None


# ---------------------------------------------------------------- format


@checker("detectable_format:number_bullet_lists")
def number_bullet_lists(text: str, num_bullets: int) -> bool:
    stars = re.findall(r"^\s*\*[^\*].*$", text, re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", text, re.MULTILINE)
    return len(stars) + len(dashes) == int(num_bullets)


@checker("detectable_format:constrained_response")
def constrained_response(text: str) -> bool:
    opts = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
    return any(o in text.strip() for o in opts)


@checker("detectable_format:number_highlighted_sections")
def highlighted_sections(text: str, num_highlights: int) -> bool:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h.strip("*").strip()]
    return len(single) + len(double) >= int(num_highlights)


@checker("detectable_format:multiple_sections")
def multiple_sections(text: str, section_spliter: str, num_sections: int) -> bool:
    parts = re.split(rf"\s?{re.escape(section_spliter.strip())}\s?\d+\s?", text)
    return len(parts) - 1 >= int(num_sections)


@checker("detectable_format:json_format")
def json_format(text: str) -> bool:
    s = text.strip()
    s = re.sub(r"^```(?:json|JSON|Json)?\s*", "", s)
    s = re.sub(r"\s*```$", "", s).strip()
    try:
        json.loads(s)
    except ValueError:
        return False
    return True


@checker("detectable_format:title")
def title(text: str) -> bool:
    return any(t.strip() for t in re.findall(r"<<([^\n]+?)>>", text))


# ---------------------------------------------------------------- combination / start-end


@checker("combination:two_responses")
def two_responses(text: str) -> bool:
    parts = [p.strip() for p in text.split("******")]
    if any(not p for p in parts[1:-1]):
        return False
    parts = [p for p in parts if p]
    return len(parts) == 2 and parts[0] != parts[1]


@checker("combination:repeat_prompt")
def repeat_prompt(text: str, prompt_to_repeat: str) -> bool:
    return text.strip().lower().startswith(prompt_to_repeat.strip().lower())


@checker("startend:end_checker")
def end_checker(text: str, end_phrase: str) -> bool:
    return text.strip().strip('"').strip().lower().endswith(end_phrase.strip().lower())


@checker("startend:quotation")
def quotation(text: str) -> bool:
    s = text.strip()
    return len(s) > 1 and s[0] == '"' and s[-1] == '"'


# ---------------------------------------------------------------- case / punctuation


@checker("change_case:capital_word_frequency")
def capital_word_frequency(text: str, capital_frequency: int, capital_relation: str = "at least") -> bool:
    count = sum(1 for w in word_tokens(text) if w.isupper())
    return _relation(count, capital_frequency, capital_relation)


@checker("change_case:english_capital")
def english_capital(text: str) -> bool:
    """All capitals, and in English ("Your entire response should be in English, and in all capital
    letters"): IFEval's checker asks langdetect too."""
    return text.isupper() and detected_language(text) == "en"


@checker("change_case:english_lowercase")
def english_lowercase(text: str) -> bool:
    return text.islower() and detected_language(text) == "en"


@checker("punctuation:no_comma")
def no_comma(text: str) -> bool:
    return "," not in text and "，" not in text


# ---------------------------------------------------------------- language (script, then langdetect)

_SCRIPTS = {
    "zh": r"[\u4e00-\u9fff]",
    "ja": r"[\u3040-\u30ff\u4e00-\u9fff]",
    "ko": r"[\uac00-\ud7af\u1100-\u11ff]",
    "ru": r"[\u0400-\u04ff]",
    "uk": r"[\u0400-\u04ff]",
    "bg": r"[\u0400-\u04ff]",
    "ar": r"[\u0600-\u06ff]",
    "fa": r"[\u0600-\u06ff]",
    "ur": r"[\u0600-\u06ff]",
    "hi": r"[\u0900-\u097f]",
    "mr": r"[\u0900-\u097f]",
    "ne": r"[\u0900-\u097f]",
    "bn": r"[\u0980-\u09ff]",
    "pa": r"[\u0a00-\u0a7f]",
    "gu": r"[\u0a80-\u0aff]",
    "ta": r"[\u0b80-\u0bff]",
    "te": r"[\u0c00-\u0c7f]",
    "kn": r"[\u0c80-\u0cff]",
    "ml": r"[\u0d00-\u0d7f]",
    "th": r"[\u0e00-\u0e7f]",
    "el": r"[\u0370-\u03ff]",
    "he": r"[\u0590-\u05ff]",
}


@functools.cache
def _langdetect():
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    DetectorFactory.seed = 0  # langdetect is randomised: a fixed seed makes the verdict deterministic
    return detect_langs, LangDetectException


@checker("language:response_language")
def response_language(text: str, language: str) -> bool:
    """The response is in `language` (an ISO 639-1 code, as IFEval's kwargs give it).

    Languages with a script of their own: most letters are in that script. Latin-script languages
    (English, French, German, Spanish, ...): langdetect's most likely language, as IFEval's own
    checker and Reasoning360 use it; English also needs Latin letters. Undetectable text is False
    (IFEval's checker says True there, which an empty answer would exploit)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    lang = language.lower().split("-")[0]
    if lang in _SCRIPTS:
        hits = len(re.findall(_SCRIPTS[lang], text))
        return hits / len(letters) > 0.5
    if not re.fullmatch(r"[a-z]{2,3}", lang):
        raise ValueError(f"ifeval: language {language!r} is not an ISO 639-1 code")
    latin = sum(1 for c in letters if c.isascii() or "\u00c0" <= c <= "\u024f")
    if latin / len(letters) <= 0.9:
        return False
    return detected_language(text) == lang


def detected_language(text: str) -> str | None:
    """langdetect's most likely language (seeded), None where it finds no features."""
    detect_langs, failure = _langdetect()
    try:
        return detect_langs(text)[0].lang.split("-")[0]
    except failure:
        return None


# ---------------------------------------------------------------- the verifier


def instructions(problem: Problem) -> list[tuple[str, dict[str, Any]]]:
    """(instruction id, kwargs) pairs of a row, in either accepted format."""
    gt, extra = decoded(problem.ground_truth), problem.extra_info
    ids = decoded(extra.get("instruction_id_list"))
    kwargs = decoded(extra.get("kwargs"))
    if isinstance(gt, dict):
        ids = decoded(gt.get("instruction_id_list", ids))
        kwargs = decoded(gt.get("kwargs", kwargs))
    elif isinstance(gt, list) and kwargs is None:
        kwargs = gt
    if not ids:
        raise ValueError("ifeval: row has no instruction_id_list")
    kwargs = kwargs if kwargs is not None else [{} for _ in ids]
    if len(kwargs) != len(ids):
        raise ValueError(f"ifeval: {len(ids)} instructions but {len(kwargs)} kwargs")
    return [(str(iid), clean_kwargs(kw)) for iid, kw in zip(ids, kwargs, strict=True)]


def clean_kwargs(kw: Any) -> dict[str, Any]:
    """An instruction's kwargs as plain Python: None values dropped (parquet adds them), whole floats
    made ints."""
    kw = decoded(kw)  # numpy values already plain Python
    if kw is not None and not isinstance(kw, dict):
        raise ValueError(f"ifeval: an instruction's kwargs must be a mapping, got {type(kw).__name__}")
    clean = {}
    for k, v in (kw or {}).items():
        if v is not None:
            clean[k] = int(v) if isinstance(v, float) and v.is_integer() else v
    return clean


def _variants(text: str, loose: bool) -> list[str]:
    if not loose:
        return [text]
    lines = text.split("\n")
    bases = [text, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip()]
    bases.append("\n".join(lines[1:-1]).strip())
    return [v for b in bases for v in (b, b.replace("*", ""))]


def unsupported(ids) -> list[str]:
    """The instruction ids (sorted, once each) that have no checker."""
    return sorted({str(i) for i in ids if i not in CHECKERS})


def check_supported(ids, who: str = "ifeval") -> None:
    """Load time: ValueError naming every instruction id without a checker."""
    unknown = unsupported(ids)
    if unknown:
        raise ValueError(f"{who}: unsupported instruction id(s) {unknown}")


def follow(response: str, todo: list[tuple[str, dict[str, Any]]], loose: bool = False) -> RewardResult:
    """1 if the answer region follows every (instruction id, kwargs); `info["followed"]` per one."""
    for iid, _ in todo:
        if iid not in CHECKERS:
            raise ValueError(f"ifeval: unsupported instruction id {iid!r}")
    text = answer_region(response).strip()
    if not text:
        return RewardResult(0.0, {"extracted": None, "reason": "no_answer", "followed": []})
    followed = []
    for iid, kw in todo:
        fn = CHECKERS[iid]
        followed.append(any(v.strip() and fn(v, **kw) for v in _variants(text, loose)))
    ok = all(followed)
    return RewardResult(
        float(ok),
        {"extracted": text[:200], "reason": "correct" if ok else "wrong", "followed": followed},
    )


@VERIFIERS.register("ifeval")
def ifeval(response: str, problem: Problem, loose: bool = False) -> RewardResult:
    """1 if the answer follows every instruction of the row; `info["followed"]` per instruction. A row
    with `extra_info.loose` true is scored loose (IFBench reports prompt-level loose accuracy)."""
    return follow(response, instructions(problem), loose or bool(problem.extra_info.get("loose")))


def check_instructions(options: dict, problem: Problem | None = None) -> None:
    """Load time: the row's instruction list reads, every id has a checker, and its kwargs are ones
    that checker takes (none missing, none unknown)."""
    if problem is not None:
        todo = instructions(problem)
        check_supported(iid for iid, _ in todo)
        check_arguments(todo)


def check_arguments(todo: list[tuple[str, dict[str, Any]]], who: str = "ifeval") -> None:
    """ValueError naming the first instruction whose kwargs its checker cannot be called with."""
    for iid, kw in todo:
        try:
            inspect.signature(CHECKERS[iid]).bind("", **kw)
        except TypeError as e:
            raise ValueError(f"{who}: instruction {iid!r} kwargs {sorted(kw)}: {e}") from None


ifeval.check_setup = check_instructions
