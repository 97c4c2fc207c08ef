"""Our "ifeval" checkers against IFEval's own implementation (Google's, as lm-evaluation-harness ships
it in `lm_eval.tasks.ifeval`) on a corpus of answers written to probe each instruction's edges.

Every instruction id both sides know is run with the kwargs below on every answer; a disagreement
must match one of the deliberate ones in KNOWN (each with its reason), and every KNOWN rule must still
be hit (a stale rule fails). Sentence and capital-word counting: IFEval uses nltk's punkt model, which
is not on PyPI; where nltk cannot find it those two ids are skipped (with the reason). Measured with
the model present: every disagreement is in KNOWN; our approximations (`ifeval.sentences`,
`ifeval.word_tokens`) also counted differently from punkt on 36 of 1,500 held-out stdlib docstring
paragraphs (79 before) and from `word_tokenize` on 10 of 941 (139 before).
"""

from __future__ import annotations

import itertools
import re

import pytest

from reasonrl.rewards.verifiers.ifeval import CHECKERS, detected_language

pytestmark = pytest.mark.timeout(300)

F = "```"
ANSWERS = [
    "I like apple pie. Pineapples are great! Do you? Yes.", "apple apple APPLE banana", "Hello world",
    "This is a test.\n\nSecond paragraph here.\n\nThird one.", "Para one.\n***\nPara two.\n***\nPara three.",
    "Para one. *** Para two.", "* item one\n* item two\n- item three", "*bold* and **strong** and *another*",
    "<<My Title>>\nBody text.", "SECTION 1\nfoo\nSECTION 2\nbar", "Section 1: a\nSection 2: b",
    '{"a": 1}', f'{F}json\n{{"a": 1}}\n{F}', f'{F}\n{{"a": 1}}\n{F}', "not json", "My answer is yes.",
    "My answer is yes. Because.", "my answer is yes.", "Response one\n******\nResponse two", "Same\n******\nSame",
    "P.S. thanks", "Hello\nP.S. see you", "Hello\np.s. see you", "Hello\nP.P.S. later", '"quoted text"',
    '  "quoted"  ', "ALL CAPS HERE", "all lower here", "Mixed Case", "no commas here", "a, b",
    "Is there anything else I can help with?", "Bye. Is there anything else I can help with?\n",
    "[name] lives at [address]", "Hello [ name ]", "Dr. Smith went home. He slept. Mr. Jones stayed.",
    "Value 3.14 is pi. Yes! Really? OK.", "Bonjour tout le monde, comment allez-vous aujourd'hui? Je vais bien merci.",
    "The quick brown fox jumps over the lazy dog and keeps running far away.", "AI AND ML ARE BIG. ok", "word " * 30,
    "One.\n\n\n\nTwo.", "First para starts here.\n\nSecondly this one.\n\nThird.", "repeat this prompt please. and then answer",
    "Art is the start of everything; artistic people know ART.", "The cat sat. Cats are cats. CAT!",
    "e-mail and email and E-Mail", "naïve café résumé", "word1 word2 word_3 4 five", "* one\n* two\n* three",
    "- one\n- two", "  * indented\n  - indented dash", "**bold line**\n* real bullet", "*not a bullet*\n* bullet",
    "1. one\n2. two", "*\n*\n*", "-one\n-two\n-three", "*a* *b* *c*", "**a** **b**", "* a *", "**** empty",
    "*multi\nline*", "***triple***", "*a**b*", "SECTION 1 intro\nSECTION 2 body\nSECTION 3 end", "Section 1\nSection 2",
    "PARAGRAPH 1 x PARAGRAPH 2 y", "SECTION1 a SECTION2 b", "One\n\nTwo\n\nThree\n\n", "\n\nOne\n\nTwo", "A *** B *** C",
    "*** A *** B ***", "One.\n* * *\nTwo.", "x\n\n\n\ny\n\nz", f"{F}JSON\n[1, 2]\n{F}", f'{F}json\n{{"a": 1}}\n{F} trailing',
    "{'a': 1}", "[]", "null", "3", '"str"', ' {"a": 1} ', f'{F}python\n{{"a": 1}}\n{F}', "<<>>", "<< >>",
    "<<Title\nBroken>>", "Text <<Title>> more <<Two>>", "<<<nested>>>", "A\n******\nB\n******\nC", "A ****** B",
    "******\nA\n******\nB", "A\n*******\nB", "Repeat this prompt please.", "REPEAT THIS PROMPT PLEASE. then",
    "Is there anything else I can help with?.", "... is there anything else i can help with?",
    '"Is there anything else I can help with?"', '"a""b"', '"', "'single'", "“curly”", "HELLO WORLD 123",
    "hello world 123", "HELLO world", "ÉCOLE", "école et lycée", "IT'S DON'T U.S.A. (WOW) HELLO, AI-POWERED",
    "I AM HERE. YOU ARE THERE.", "OK OK ok", "iPhone USA NASA FBI ok", "a，b", "a;b", "[a] [b] [c]", "[]", "[ ]",
    "[a\nb]", "[[nested]]", "[x](link)", "PS: hi", "P.S hi", "p. s. hi", "P.P.S hi", "Text\n\nPS thanks", "P.S.: x",
    "p.p.s. y", "Wait... what? Yes!! No.", "Mr. Smith, Jr. went to Washington D.C. yesterday. He left.",
    "e.g. this is one. i.e. also.", "No punctuation at all", "One sentence only.", "A. B. C. D. E.",
    "Hola, ¿cómo estás? Estoy muy bien, gracias por preguntar.", "Guten Tag, wie geht es Ihnen heute? Mir geht es gut.",
    "This is clearly an English sentence about the weather today.", "ok", "12345", "Привет, как дела?",
    "Sure! Here is a summary.\n\n## Key points\n\n- The economy grew by 3.2% in Q3.\n- Unemployment fell.\n\nIn short, good.",
    "THE U.S. ECONOMY IS LARGE. THE E.U. IS TOO. BOTH TRADE A LOT.", "the u.s. economy is large and the e.u. is too.",
]  # fmt: skip
KWARGS = {
    "keywords:existence": [{"keywords": ["apple"]}, {"keywords": ["pie", "great"]}, {"keywords": ["art"]}],
    "keywords:frequency": [{"keyword": "apple", "frequency": 2, "relation": "at least"},
                           {"keyword": "apple", "frequency": 3, "relation": "less than"},
                           {"keyword": "cat", "frequency": 2, "relation": "at least"}],
    "keywords:forbidden_words": [{"forbidden_words": ["apple"]}, {"forbidden_words": ["test", "json"]}],
    "keywords:letter_frequency": [{"letter": "a", "let_frequency": 3, "let_relation": "at least"},
                                  {"letter": "e", "let_frequency": 5, "let_relation": "less than"}],
    "length_constraints:number_words": [{"num_words": 5, "relation": "at least"}, {"num_words": 10, "relation": "less than"}],
    "length_constraints:number_sentences": [{"num_sentences": 3, "relation": "at least"},
                                            {"num_sentences": 2, "relation": "less than"}],
    "length_constraints:number_paragraphs": [{"num_paragraphs": 3}, {"num_paragraphs": 2}],
    "length_constraints:nth_paragraph_first_word": [
        {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "secondly"},
        {"num_paragraphs": 3, "nth_paragraph": 1, "first_word": "this"}],
    "detectable_content:number_placeholders": [{"num_placeholders": 1}, {"num_placeholders": 2}],
    "detectable_content:postscript": [{"postscript_marker": "P.S."}, {"postscript_marker": "P.P.S"}],
    "detectable_format:number_bullet_lists": [{"num_bullets": 3}, {"num_bullets": 2}],
    "detectable_format:constrained_response": [{}],
    "detectable_format:number_highlighted_sections": [{"num_highlights": 2}, {"num_highlights": 3}],
    "detectable_format:multiple_sections": [{"section_spliter": "SECTION", "num_sections": 2},
                                            {"section_spliter": "Section", "num_sections": 2},
                                            {"section_spliter": "PARAGRAPH", "num_sections": 2}],
    "detectable_format:json_format": [{}],
    "detectable_format:title": [{}],
    "combination:two_responses": [{}],
    "combination:repeat_prompt": [{"prompt_to_repeat": "Repeat this prompt please."}],
    "startend:end_checker": [{"end_phrase": "Is there anything else I can help with?"}],
    "startend:quotation": [{}],
    "change_case:capital_word_frequency": [{"capital_frequency": 2, "capital_relation": "at least"},
                                           {"capital_frequency": 3, "capital_relation": "less than"}],
    "change_case:english_capital": [{}],
    "change_case:english_lowercase": [{}],
    "punctuation:no_comma": [{}],
    "language:response_language": [{"language": "en"}, {"language": "fr"}, {"language": "es"},
                                   {"language": "de"}, {"language": "ru"}],
}  # fmt: skip
NEEDS_PUNKT = {"length_constraints:number_sentences", "change_case:capital_word_frequency"}

# deliberate disagreements: (instruction id, test on (kwargs, answer), why)
KNOWN = [
    ("keywords:existence", lambda kw, t: any(re.search(k, t, re.I) and not re.search(rf"\b{k}\b", t, re.I)
                                               for k in kw["keywords"]),
     "a keyword must be a word: IFEval finds 'art' inside 'start' (a substring search)"),
    ("keywords:frequency", lambda kw, t: len(re.findall(kw["keyword"], t, re.I))
     != len(re.findall(rf"\b{kw['keyword']}\b", t, re.I)), "the same: 'apple' inside 'Pineapples' is no keyword"),
    ("detectable_content:number_placeholders", lambda kw, t: "[]" in t,
     "an empty [] is no placeholder (IFEval counts it, so '[]' repeated would pass)"),
    ("punctuation:no_comma", lambda kw, t: "，" in t, "a full-width comma is a comma"),
    ("language:response_language", lambda kw, t: detected_language(t) is None,
     "undetectable text (no letters) follows no language; IFEval says True, which an empty-ish answer exploits"),
    ("language:response_language", lambda kw, t: kw["language"] == "ru" and re.search("[а-я]", t),
     "a Cyrillic answer is Russian by its script; langdetect calls this short one Macedonian"),
    ("length_constraints:number_sentences", lambda kw, t: t in ("P.S.: x", "A. B. C. D. E."),
     "punkt's model splits after 'P.S.:' and after the first of a run of initials; ours does not"),
]  # fmt: skip


@pytest.fixture(scope="module")
def official():
    """IFEval's instruction classes; nltk's download (of punkt, at import) is disabled: no network."""
    pytest.importorskip("immutabledict", reason="lm-eval's IFEval needs immutabledict (the dev extra)")
    nltk = pytest.importorskip("nltk", reason="lm-eval's IFEval needs nltk (the dev extra)")
    nltk.download = lambda *a, **k: False
    registry = pytest.importorskip("lm_eval.tasks.ifeval.instructions_registry")
    from langdetect import DetectorFactory

    DetectorFactory.seed = 0  # IFEval's langdetect calls are randomised; ours are seeded the same
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        punkt = True
    except LookupError:
        punkt = False
    return registry.INSTRUCTION_DICT, punkt


def _official_verdict(cls, iid: str, kw: dict, text: str) -> bool:
    inst = cls(iid)
    inst.build_description(**kw)
    return bool(text.strip() and inst.check_following(text))


@pytest.mark.parametrize("iid", sorted(KWARGS))
def test_checker_agrees_with_ifevals_own_but_for_known_reasons(official, iid):
    registry, punkt = official
    if iid in NEEDS_PUNKT and not punkt:
        pytest.skip("IFEval counts these with nltk's punkt model, which is not installed (not on PyPI)")
    assert iid in CHECKERS and iid in registry
    rules = [(test, why) for rid, test, why in KNOWN if rid == iid]
    hit, unexplained = set(), []
    for kw, text in itertools.product(KWARGS[iid], ANSWERS):
        ours = bool(text.strip()) and CHECKERS[iid](text, **kw)
        if ours == _official_verdict(registry[iid], iid, kw, text):
            continue
        why = next((w for test, w in rules if test(kw, text)), None)
        if why is None:
            unexplained.append((kw, text, "ifeval" if not ours else "ours"))
        hit.add(why)
    assert not unexplained, f"{len(unexplained)} new disagreements (who says True): {unexplained[:5]}"
    assert not {w for _, w in rules} - hit, "a KNOWN rule no longer matches any disagreement: remove it"


def test_every_instruction_id_of_ifeval_is_covered(official):
    registry, _ = official
    assert set(registry) == set(KWARGS) <= set(CHECKERS)
