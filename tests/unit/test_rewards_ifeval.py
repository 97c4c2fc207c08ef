"""IFEval verifier: one row per instruction type (passing and failing), row formats, all-must-pass."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reasonrl.rewards import VERIFIERS
from reasonrl.rewards.verifiers.ifeval import CHECKERS, instructions, sentences
from reasonrl.types import Problem

pytestmark = pytest.mark.timeout(60)


def score(response, ids, kwargs, **opts):
    p = Problem(
        prompt=[{"role": "user", "content": "Write something."}],
        ground_truth=kwargs,
        data_source="ood__ifeval",
        extra_info={"instruction_id_list": ids},
    )
    return VERIFIERS.get("ifeval")(response, p, **opts)


CASES = [
    # (instruction id, kwargs, following text, violating text)
    ("keywords:existence", {"keywords": ["apple", "pie"]}, "An apple pie.", "An apple tart."),
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": "at least"}, "cat and cat", "cat"),
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": "less than"}, "one cat", "cat cat"),
    ("keywords:forbidden_words", {"forbidden_words": ["bad"]}, "a good day", "a Bad day"),
    (
        "keywords:letter_frequency",
        {"letter": "z", "let_frequency": 3, "let_relation": "at least"},
        "zzZ",
        "zz",
    ),
    (
        "length_constraints:number_words",
        {"num_words": 3, "relation": "less than"},
        "two words",
        "one two three",
    ),
    ("length_constraints:number_words", {"num_words": 3, "relation": "at least"}, "one two three", "one two"),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "at least"}, "Hi. Bye!", "Hi."),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "one\n***\ntwo", "one\n***\n\n***\ntwo"),
    (
        "length_constraints:nth_paragraph_first_word",
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
        "First.\n\nThen more.",
        "First.\n\nAfter that.",
    ),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[name] at [address]", "[name] only"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi.\nP.S. bye", "Hi. bye"),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Hi.\nP.P.S bye", "Hi.\nP.S. bye"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n* b", "* a\n* b\n* c"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "- a\n- b", "- a"),
    ("detectable_format:constrained_response", {}, "My answer is yes.", "Yes."),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*a* and *b*", "*a* and **"),
    (
        "detectable_format:multiple_sections",
        {"section_spliter": "Section", "num_sections": 2},
        "Section 1\nx\nSection 2\ny",
        "Section 1\nx",
    ),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', "{'a': 1}"),
    ("detectable_format:title", {}, "<<My Title>>\ntext", "<<>> text"),
    ("combination:two_responses", {}, "first******second", "same******same"),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi"}, "Say hi. Hi!", "Hi!"),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Done. Any other questions?", "Done."),
    ("startend:quotation", {}, '"quoted"', 'not "quoted"'),
    (
        "change_case:capital_word_frequency",
        {"capital_frequency": 2, "capital_relation": "at least"},
        "AB CD x",
        "AB x",
    ),
    ("change_case:english_capital", {}, "ALL CAPS HERE", "Not all caps"),
    ("change_case:english_lowercase", {}, "all lower here", "Not lower"),
    ("punctuation:no_comma", {}, "no commas here", "one, two"),
    ("language:response_language", {"language": "ru"}, "Привет, как дела?", "Hello, how are you?"),
    ("language:response_language", {"language": "en"}, "This is a plain English answer.", "これは日本語です"),
]


@pytest.mark.parametrize("iid, kwargs, good, bad", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_instruction(iid, kwargs, good, bad):
    assert score(good, [iid], [kwargs]).score == 1.0
    got = score(bad, [iid], [kwargs])
    assert got.score == 0.0 and got.info["followed"] == [False]


def test_all_instructions_must_pass():
    ids = ["punctuation:no_comma", "change_case:english_lowercase"]
    assert score("all lower no commas", ids, [{}, {}]).score == 1.0
    got = score("all lower, with a comma", ids, [{}, {}])
    assert got.score == 0.0 and got.info["followed"] == [False, True]


@pytest.mark.parametrize(
    "response, reason",
    [
        ("", "no_answer"),
        ("<think>my answer is lowercase</think>", "no_answer"),
        ("<think>unclosed reasoning", "no_answer"),
    ],
)
def test_empty_answers_follow_nothing(response, reason):
    got = score(response, ["punctuation:no_comma"], [{}])
    assert (got.score, got.reason) == (0.0, reason)


def test_only_text_after_think_is_checked():
    assert score("<think>a, b, c</think>no commas", ["punctuation:no_comma"], [{}]).score == 1.0


def test_loose_mode_forgives_a_preamble_line():
    text = "Sure, here it is:\nall lower text"
    assert score(text, ["punctuation:no_comma"], [{}]).score == 0.0
    assert score(text, ["punctuation:no_comma"], [{}], loose=True).score == 1.0


def test_row_formats():
    ifeval_style = Problem(
        prompt=[{"role": "user", "content": "x"}],
        ground_truth=json.dumps(
            {"instruction_id_list": ["keywords:existence"], "kwargs": [{"keywords": ["a"]}]}
        ),
        data_source="ood__ifeval",
    )
    assert instructions(ifeval_style) == [("keywords:existence", {"keywords": ["a"]})]
    # Reasoning360 / parquet style: numpy arrays, None-padded kwargs, float counts
    r360 = Problem(
        prompt=[{"role": "user", "content": "x"}],
        ground_truth=np.array([{"num_words": 5.0, "relation": "at least", "keywords": None}]),
        data_source="ood__ifeval",
        extra_info={"instruction_id_list": np.array(["length_constraints:number_words"])},
    )
    assert instructions(r360) == [
        ("length_constraints:number_words", {"num_words": 5, "relation": "at least"})
    ]


def test_bad_rows_raise():
    with pytest.raises(ValueError, match="unsupported instruction"):
        score("x", ["keywords:key_sentences"], [{}])
    with pytest.raises(ValueError, match="instructions but"):
        score("x", ["punctuation:no_comma", "startend:quotation"], [{}])
    with pytest.raises(ValueError, match="not an ISO 639-1 code"):
        score("bonjour", ["language:response_language"], [{"language": "French!"}])


def test_sentence_splitter():
    assert len(sentences("Dr. Smith arrived. He paid $3.50! Was it fine?")) == 3


def test_common_instruction_ids_are_covered():
    assert len(CHECKERS) >= 25


@pytest.mark.parametrize(
    "text, language, expected",
    [
        ("Bonjour, je m'appelle Marie et j'habite à Paris depuis dix ans avec ma famille.", "fr", True),
        ("Hallo, ich heiße Anna und wohne seit zehn Jahren mit meiner Familie in Berlin.", "de", True),
        ("Hola, me llamo Juan y vivo en Madrid con mi familia desde hace diez años.", "es", True),
        ("Ciao, mi chiamo Luca e vivo a Roma con la mia famiglia da dieci anni.", "it", True),
        ("Hello, my name is Anna and I have lived in Berlin with my family for ten years.", "de", False),
        ("Bonjour, je m'appelle Marie et j'habite à Paris depuis dix ans avec ma famille.", "en", False),
        ("Hello, my name is Anna and I have lived in Berlin with my family for ten years.", "en", True),
        ("Привет, меня зовут Анна.", "fr", False),
        ("12345 !!! ???", "fr", False),  # nothing to detect: no credit
        ("", "en", False),
    ],
)
def test_response_language_for_latin_script_languages(text, language, expected):
    assert score(text, ["language:response_language"], [{"language": language}]).score == float(expected)
