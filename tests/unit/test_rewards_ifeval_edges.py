"""Edges of the "ifeval" checkers and of the sentence and word counting they share (each test closes
a gap a mutant of `rewards/verifiers/ifeval.py` showed)."""

from __future__ import annotations

import pytest

from reasonrl.rewards.verifiers import ifeval
from reasonrl.rewards.verifiers.ifeval import CHECKERS, sentences, word_tokens


@pytest.mark.parametrize(
    "relation, expected",  # a keyword found 3 times against frequency 2, 3 and 4
    [("less than", [False, False, True]), ("at least", [True, True, False]), ("at_least", [True, True, False]),
     (None, [True, True, False]), ("at most", [False, True, True]), (" At_Most ", [False, True, True]),
     ("exactly", [False, True, False]), ("equal to", [False, True, False])],
)  # fmt: skip
def test_relations(relation, expected):
    freq = CHECKERS["keywords:frequency"]
    assert [freq("cat cat Cat", "cat", n, relation) for n in (2, "3", 4.0)] == expected


def test_relation_defaults_and_unknown_relations():
    assert CHECKERS["keywords:frequency"] is ifeval.keyword_frequency  # the decorator keeps the function
    assert ifeval.keyword_frequency("cat cat", "cat", 2) and not ifeval.keyword_frequency("cat", "cat", 2)
    assert ifeval.letter_frequency("aab", "A", 2) and not ifeval.letter_frequency("ab", "a", 2)
    assert ifeval.number_words("one two", 2) and not ifeval.number_words("one", 2)
    assert ifeval.number_sentences("One. Two.", 2) and not ifeval.number_sentences("One.", 2)
    assert ifeval.capital_word_frequency("AB CD ef", 2) and not ifeval.capital_word_frequency("AB cd", 2)
    with pytest.raises(ValueError, match="unknown relation 'around'"):
        ifeval.keyword_frequency("cat", "cat", 1, "around")


@pytest.mark.parametrize(
    "text, expected",
    [("Item 1. one more thing.", ["Item 1. one more thing."]), ("Item 1. aB thing.", ["Item 1. aB thing."]),  # a number before a lowercase word
     ("It is 1. One more.", ["It is 1.", "One more."]), ("It is big. one more.", ["It is big.", "one more."]),
     ("Wait... what now?", ["Wait... what now?"]), ("Wait... What now?", ["Wait...", "What now?"]),
     ("Really?! no way.", ["Really?!", "no way."]), ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
     ("See Dr. Who. I. M. Pei came.", ["See Dr. Who.", "I. M. Pei came."]), ("A line\nno stop", ["A line\nno stop"]),
     ("  One.   Two!  ", ["One.", "Two!"]), (". Then.", [". Then."]),
     ("He met (Dr. Who. Then left.", ["He met (Dr. Who.", "Then left."]),
     # each kind of non-split, then a split after it: the splitter goes on past the first
     (". Then. Next.", [". Then.", "Next."]), ("Item 1. one more. Then two.", ["Item 1. one more.", "Then two."]),
     ("Wait... what now? Yes.", ["Wait... what now?", "Yes."])],
)  # fmt: skip
def test_sentences_split_where_punkt_splits(text, expected):
    assert sentences(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [("DON'T stop", ["DO", "N'T", "stop"]), ("I'M", ["I", "'M"]), ("n't", ["n't"]), ("(Hello), world!", ["Hello", "world"]),
     ("Xerox X-ray", ["Xerox", "X-ray"]), ("a--b", ["a", "b"]), ("a , b", ["a", "b"]), ("U.S.A.", ["U.S.A"]),
     ('say "WHO" [x] {y} <z>', ["say", "WHO", "x", "y", "z"])],
)  # fmt: skip
def test_word_tokens(text, expected):
    assert word_tokens(text) == expected


def test_nth_paragraph_bounds_and_a_paragraph_without_words():
    nth = CHECKERS["length_constraints:nth_paragraph_first_word"]
    two = "Hello there.\n\nWorld here."
    assert nth(two, 2, 2, "world") and nth(two, 2, 1, " Hello ")
    assert not nth(two, 2, 0, "world") and not nth(two, 2, 3, "world") and not nth(two, 3, 2, "world")
    assert not nth("!!!\n\nHello", 2, 1, "hello")  # no word to start it
    assert nth("**Hello** there.\n\nWorld.", 2, 1, "hello")  # the word, without the markup before it


def test_postscript_markers():
    ps = CHECKERS["detectable_content:postscript"]
    assert ps("Hi\nP.S. bye") and not ps("Hi\nbye")  # the default marker
    assert (
        ps("Hi\nP. P. S. later", "P. P. S")
        and ps("Hi\np.p.s later", "P.P.S")
        and not ps("Hi\nP.S. x", "P.P.S")
    )
    assert ps("Hi\np.s. x", "P. S.") and ps("Hi\nps x", "ps")
    assert ps("Hi\np.p.s later", "P. P. S") and ps("Hi\np. p. s later", "P.P.S")
    assert ps("Hi\nNote: x", "Note:") and not ps("Hi\nNote x", "Note:")


def test_format_checkers_edges():
    assert all(
        CHECKERS["detectable_format:constrained_response"](f"So: My answer is {a}.")
        for a in ("yes", "no", "maybe")
    )
    assert not CHECKERS["detectable_format:constrained_response"]("My answer is perhaps.")
    assert CHECKERS["detectable_format:number_highlighted_sections"]("*X* and *x*", 2)
    assert CHECKERS["detectable_format:number_highlighted_sections"]("**X** and *y*", 2)
    two = CHECKERS["combination:two_responses"]
    assert two("******\nA\n******\nB") and two("A\n******\nB\n******") and two("A ****** B")
    assert (
        two("A\n******\n\n******\nB") is False and not two("A\n******\nA") and not two("A ****** B ****** C")
    )
    end = CHECKERS["startend:end_checker"]
    assert end('The end is X"', "is X") and end("Is there anything else? ", " is THERE anything else?")
    quoted = CHECKERS["startend:quotation"]
    assert quoted('""') and quoted(' "a" ') and not quoted('"') and not quoted('"abc') and not quoted('abc"')


SCRIPT_SAMPLES = {
    "zh": "你好世界，我们今天学习数学。", "ja": "こんにちは、世界です。", "ko": "안녕하세요 세계",
    "ru": "Привет мир", "uk": "Привіт світе", "bg": "Здравей свят", "ar": "مرحبا بالعالم", "fa": "سلام دنیا",
    "ur": "ہیلو دنیا", "hi": "नमस्ते दुनिया", "mr": "नमस्कार जग", "ne": "नमस्ते संसार", "bn": "হ্যালো বিশ্ব",
    "pa": "ਸਤ ਸ੍ਰੀ ਅਕਾਲ", "gu": "નમસ્તે વિશ્વ", "ta": "வணக்கம் உலகம்", "te": "హలో ప్రపంచం", "kn": "ನಮಸ್ಕಾರ ಜಗತ್ತು",
    "ml": "ഹലോ ലോകം", "th": "สวัสดีชาวโลก", "el": "Γειά σου κόσμε", "he": "שלום עולם",
}  # fmt: skip


def test_every_script_language_reads_its_own_script():
    lang = CHECKERS["language:response_language"]
    assert set(SCRIPT_SAMPLES) == set(ifeval._SCRIPTS)
    for code, text in SCRIPT_SAMPLES.items():
        other = SCRIPT_SAMPLES["he" if code != "he" else "el"]
        assert lang(text, code) and lang(f"{text} ok", f"{code.upper()}-XX"), code
        assert not lang("Hello world, how are you today?", code) and not lang(other, code), code


def test_script_share_and_langdetect_seed():
    from langdetect import DetectorFactory

    lang = CHECKERS["language:response_language"]
    assert lang("абвг abcd", "ru") is False  # half the letters: not "most"
    assert not lang("Привет hello world everyone", "ru") and lang("Привет мир hello", "ru")
    assert lang("12345 !!!", "fr") is False
    ifeval._langdetect.cache_clear()
    DetectorFactory.seed = None
    assert ifeval.detected_language("This is clearly an English sentence about the weather.") == "en"
    assert DetectorFactory.seed == 0  # langdetect is randomised: seeded for a deterministic verdict


def _row(gt, **extra):
    from reasonrl.types import Problem

    return Problem([{"role": "user", "content": "x"}], gt, "ood__ifeval", extra_info=extra)


def test_row_forms_and_kwargs_cleaning():
    import numpy as np

    from reasonrl.rewards.verifiers.ifeval import clean_kwargs, instructions

    ids = ["keywords:existence"]
    assert instructions(_row("", instruction_id_list=ids, kwargs=[{"keywords": ["a"]}])) == [
        ("keywords:existence", {"keywords": ["a"]})]  # fmt: skip
    for gt in (None, ""):  # no kwargs anywhere: none needed
        assert instructions(_row(gt, instruction_id_list=["punctuation:no_comma"])) == [
            ("punctuation:no_comma", {})
        ]
    given = _row([{"keywords": ["gt"]}], instruction_id_list=ids, kwargs=[{"keywords": ["extra"]}])
    assert instructions(given) == [("keywords:existence", {"keywords": ["extra"]})]  # extra_info's kwargs win
    with pytest.raises(ValueError, match="ifeval: row has no instruction_id_list$"):
        instructions(_row([{}]))
    assert clean_kwargs(None) == {} and clean_kwargs({"a": None, "b": 2.5, "c": 3.0}) == {"b": 2.5, "c": 3}
    assert clean_kwargs({"keywords": np.array(["a", "b"])}) == {"keywords": ["a", "b"]}


def test_loose_variants_drop_the_first_and_last_lines_and_stars():
    from reasonrl.rewards.verifiers.ifeval import _variants

    assert _variants("*a*\nb\nc", False) == ["*a*\nb\nc"]
    assert _variants("a\nb\nc\nd", True)[6] == "b\nc"  # the middle lines, still joined by line breaks
    assert _variants("*a*\nb\nc", True) == [
        "*a*\nb\nc",
        "a\nb\nc",
        "b\nc",
        "b\nc",
        "*a*\nb",
        "a\nb",
        "b",
        "b",
    ]


def test_detected_language_is_the_bare_code():
    assert ifeval.detected_language("你好世界，我们今天学习数学。今天天气很好。") == "zh"  # langdetect: zh-cn


def test_unsupported_ids_and_the_verifiers_result():
    from reasonrl.rewards.verifiers.ifeval import check_supported, follow, unsupported

    assert unsupported(["x:y", "punctuation:no_comma", "x:y", "a:b"]) == ["a:b", "x:y"]
    with pytest.raises(ValueError, match=r"^ifeval: unsupported instruction id\(s\) \['x:y'\]$"):
        check_supported(["x:y", "punctuation:no_comma"])
    assert check_supported(["punctuation:no_comma"]) is None
    with pytest.raises(ValueError, match="unsupported"):
        ifeval.ifeval.check_setup({}, _row(None, instruction_id_list=["x:y"]))
    comma = [("punctuation:no_comma", {})]
    assert follow("Sure, here:\nall lower", comma).score == 0.0  # strict unless asked
    assert follow("a, b", comma, loose=True).score == 0.0  # a one-line answer's empty variants check nothing
    assert follow("<think>x</think>  ", comma).info == {
        "extracted": None,
        "reason": "no_answer",
        "followed": [],
    }
    got = follow("x" * 300, comma)
    assert got.info == {"extracted": "x" * 200, "reason": "correct", "followed": [True]}
    assert follow("a, b", comma).info["reason"] == "wrong"
    loose_row = _row(None, instruction_id_list=["punctuation:no_comma"], loose=True)
    assert ifeval.ifeval("Sure, here:\nall lower", loose_row).score == 1.0  # IFBench's rows ask for loose
