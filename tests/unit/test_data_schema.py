"""Problem <-> verl / Reasoning360 rows, parquet and jsonl files: round trips, foreign parquet read
as is, errors that name file and row, atomic writes."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonrl.data.files import read_rows
from reasonrl.data.schema import load_problems, read_problems, write_problems
from reasonrl.data.tasks import generate
from reasonrl.types import Problem


def _problems() -> list[Problem]:
    arith = generate("arithmetic", 3, seed=0, difficulty=2)
    count = generate("countdown", 3, seed=0, difficulty=3)
    extra = Problem(
        prompt=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2="}],
        ground_truth="4",
        data_source="reasonrl/arithmetic",
        ability="math",
        extra_info={"index": 7, "nested": {"a": [1, 2]}},
        verifier="arithmetic",
        uid="u-7",
    )
    return arith + count + [extra]


def _same(a: Problem, b: Problem) -> None:
    """Every field survives; extra_info may gain the uid / verifier it carries in a row."""
    assert b.prompt == a.prompt
    assert b.ground_truth == a.ground_truth
    assert type(b.ground_truth) is type(a.ground_truth)
    assert (b.data_source, b.ability, b.verifier, b.uid) == (a.data_source, a.ability, a.verifier, a.uid)
    for k, v in a.extra_info.items():
        assert b.extra_info[k] == v
    assert set(b.extra_info) - set(a.extra_info) <= {"uid", "verifier"}


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_round_trip(tmp_path, suffix):
    probs = _problems()
    path = tmp_path / f"sub/dir/data{suffix}"  # parent directories are created
    write_problems(path, probs)
    back = read_problems(path)
    assert len(back) == len(probs)
    for a, b in zip(probs, back):
        _same(a, b)
    # the countdown ground truth comes back as a dict, not as its JSON text
    assert back[3].ground_truth == probs[3].ground_truth
    assert isinstance(back[3].ground_truth["numbers"], list)
    assert back[6].user_text == "2+2="
    assert "ground_truth_json" not in back[3].extra_info
    # nothing else is left in the directory (no temp files)
    assert [p.name for p in path.parent.iterdir()] == [path.name]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_round_trip_is_identity(tmp_path, suffix):
    probs = _problems()
    write_problems(tmp_path / f"d{suffix}", probs)
    assert read_problems(tmp_path / f"d{suffix}") == probs


def test_second_round_trip_is_stable(tmp_path):
    once = tmp_path / "a.parquet"
    twice = tmp_path / "b.jsonl"
    write_problems(once, _problems())
    first = read_problems(once)
    write_problems(twice, first)
    assert read_problems(twice) == first


def test_reads_foreign_verl_parquet_as_is(tmp_path):
    """A Reasoning360 / verl file written by pyarrow directly: structs, not JSON strings."""
    path = tmp_path / "guru.parquet"
    rows = [
        {
            "data_source": "math__deepscaler",
            "prompt": [{"role": "user", "content": "What is 1+1? Put the answer in \\boxed{}."}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "2"},
            "extra_info": {"split": "train", "index": 11},
        },
        {
            "data_source": "openai/gsm8k",
            "prompt": [
                {"role": "system", "content": "Think step by step."},
                {"role": "user", "content": "Tom has 3 apples..."},
            ],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "5"},
            "extra_info": {"split": "test", "index": 12},
        },
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    # the file really holds structs / lists, not strings
    schema = pq.read_schema(path)
    assert pa.types.is_struct(schema.field("reward_model").type)
    assert pa.types.is_struct(schema.field("extra_info").type)
    assert pa.types.is_list(schema.field("prompt").type)

    probs = read_problems(path)
    assert [p.data_source for p in probs] == ["math__deepscaler", "openai/gsm8k"]
    assert probs[0].prompt == rows[0]["prompt"]
    assert probs[1].prompt == rows[1]["prompt"]
    assert probs[1].user_text == "Tom has 3 apples..."
    assert [p.ground_truth for p in probs] == ["2", "5"]
    assert probs[0].extra_info == {"split": "train", "index": 11}
    assert [p.uid for p in probs] == ["11", "12"]
    assert probs[0].ability == "math" and probs[0].verifier is None


def test_reads_jsonl_with_string_prompt_and_json_string_fields(tmp_path):
    path = tmp_path / "x.jsonl"
    row = {
        "data_source": "reasonrl/countdown",
        "prompt": "Use 1 2 to make 3",
        "reward_model": json.dumps({"ground_truth": {"target": 3, "numbers": [1, 2]}}),
        "extra_info": json.dumps({"index": 4, "verifier": "countdown"}),
    }
    path.write_text(json.dumps(row) + "\n\n")  # blank lines are skipped
    (p,) = read_problems(path)
    assert p.prompt == [{"role": "user", "content": "Use 1 2 to make 3"}]
    assert p.ground_truth == {"target": 3, "numbers": [1, 2]}
    assert p.verifier == "countdown"
    assert p.uid == "4"
    assert p.ability == ""


GOOD = {
    "data_source": "d",
    "prompt": [{"role": "user", "content": "q"}],
    "reward_model": {"ground_truth": "a"},
}

BAD_ROWS = [
    # (row, text the error must contain besides the file and row: the field and what is wrong)
    ({k: v for k, v in GOOD.items() if k != "prompt"}, "missing field(s) ['prompt']"),
    ({k: v for k, v in GOOD.items() if k != "reward_model"}, "missing field(s) ['reward_model']"),
    ({"prompt": GOOD["prompt"]}, "missing field(s) ['data_source', 'reward_model']"),
    ({**GOOD, "data_source": ""}, "field 'data_source' must be a non-empty string"),
    ({**GOOD, "data_source": 7}, "field 'data_source' must be a non-empty string"),
    ({**GOOD, "prompt": []}, "field 'prompt' is empty (and there is no 'raw_prompt')"),
    ({**GOOD, "prompt": 42}, "field 'prompt' must be a list of {role, content} messages, got int"),
    (
        {**GOOD, "prompt": {"role": "user"}},
        "field 'prompt' must be a list of {role, content} messages, got dict",
    ),
    ({**GOOD, "prompt": [{"content": "no role"}]}, "field 'prompt[0]' must be a {role: str, content: str}"),
    (
        {**GOOD, "prompt": [GOOD["prompt"][0], "text"]},
        "field 'prompt[1]' must be a {role: str, content: str}",
    ),
    # a chat template skips a role it does not know: the model would see no question
    (
        {**GOOD, "prompt": [{"role": "human", "content": "What is 2 + 2?"}]},
        "field 'prompt[0].role' is 'human', not one of system, developer, user, assistant",
    ),
    (
        {**GOOD, "prompt": [{"role": "system", "content": " "}, {"role": "user", "content": "\n"}]},
        "field 'prompt' has no text (every message's content is blank)",
    ),
    ({**GOOD, "reward_model": {"style": "rule"}}, "field 'reward_model' has no 'ground_truth'"),
    ({**GOOD, "reward_model": ["a"]}, "field 'reward_model' must be a mapping, got list"),
    ({**GOOD, "reward_model": '{"ground_truth": '}, "field 'reward_model' is not valid JSON"),
    ({**GOOD, "reward_model": {"ground_truth": None}}, "field 'reward_model.ground_truth' is null"),
    ({**GOOD, "extra_info": "{bad json"}, "field 'extra_info' is not valid JSON"),
    ({**GOOD, "extra_info": [1, 2]}, "field 'extra_info' must be a mapping, got list"),
    ({**GOOD, "extra_info": "[1, 2]"}, "field 'extra_info' must be a mapping, got list"),
    (["not", "a", "row"], "a row must be a mapping, got list"),
]


@pytest.mark.parametrize("row,needle", BAD_ROWS, ids=range(len(BAD_ROWS)))
def test_bad_jsonl_row_error_names_file_and_row(tmp_path, row, needle):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [GOOD, GOOD, row]))
    with pytest.raises(ValueError) as e:
        read_problems(path)
    msg = str(e.value)
    assert f"{path} row 2: " in msg, msg
    assert needle in msg, msg


def _parquet_with_null(tmp_path, key: str):
    """A parquet whose row 1 holds null in column `key` (how a missing key looks in parquet)."""
    path = tmp_path / "null.parquet"
    rows = [GOOD, {**GOOD, key: None}]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_parquet_null_reward_model_names_file_and_row(tmp_path):
    path = _parquet_with_null(tmp_path, "reward_model")
    with pytest.raises(ValueError) as e:
        read_problems(path)
    assert f"{path} row 1: missing field(s) ['reward_model']" in str(e.value)


@pytest.mark.parametrize("key", ["prompt", "data_source"])
def test_parquet_null_required_field_names_file_and_row(tmp_path, key):
    path = _parquet_with_null(tmp_path, key)
    with pytest.raises(ValueError) as e:
        read_problems(path)
    assert f"{path} row 1: " in str(e.value)
    assert key in str(e.value)


def test_bad_json_names_file_and_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + '{"data_source": "d", "prompt": \n')
    with pytest.raises(ValueError) as e:
        read_problems(path)
    assert f"{path} line 2: invalid JSON" in str(e.value)


def test_missing_file_and_bad_extension(tmp_path):
    with pytest.raises(FileNotFoundError, match="data file not found"):
        read_problems(tmp_path / "none.parquet")
    (tmp_path / "x.txt").write_text("a,b\n")
    with pytest.raises(ValueError, match="unsupported extension"):
        read_problems(tmp_path / "x.txt")
    with pytest.raises(ValueError, match="unsupported extension"):
        write_problems(tmp_path / "y.csv", _problems())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]  # no temp file left behind


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_failed_write_keeps_the_old_file(tmp_path, suffix):
    path = tmp_path / f"data{suffix}"
    old = _problems()[:2]
    write_problems(path, old)
    before = path.read_bytes()
    bad = Problem(
        prompt=[{"role": "user", "content": "q"}],
        ground_truth="1",
        data_source="d",
        extra_info={"unserialisable": object()},
    )
    with pytest.raises(TypeError):
        write_problems(path, _problems() + [bad])
    assert path.read_bytes() == before
    assert [p.ground_truth for p in read_problems(path)] == [p.ground_truth for p in old]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_load_problems_concatenates_in_order(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.jsonl"
    probs = _problems()
    write_problems(a, probs[:3])
    write_problems(b, probs[3:])
    got = load_problems([str(a), str(b)])
    assert [p.uid for p in got] == [p.uid for p in probs]


@pytest.mark.parametrize(
    "name, content, needle",
    [
        (
            "utf8.jsonl",
            json.dumps(GOOD).encode() + b"\n" + b'{"data_source": "\xff"}\n',
            "line 2: invalid UTF-8 (byte 0xff",
        ),
        ("empty.jsonl", b"", "empty file (no rows)"),
        ("blank.jsonl", b"\n\n", "no rows"),
        ("broken.jsonl", json.dumps(GOOD).encode() + b"\n{oops\n", "line 2: invalid JSON"),
        ("broken.parquet", b"PAR1 not really", "not a readable parquet file"),
        ("rows.txt", b"a,b", "unsupported extension"),
        ("array.json", b'[{"data_source": "d"}]', "row 0: missing field(s) ['prompt', 'reward_model']"),
    ],
)
def test_bad_files_are_named_with_line_or_row(tmp_path, name, content, needle):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError) as e:
        read_problems(path)
    assert str(e.value).startswith(str(path)) and needle in str(e.value), str(e.value)


def test_a_directory_or_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path} is a directory, not a data file"):
        read_problems(tmp_path)
    with pytest.raises(FileNotFoundError, match="data file not found: .*nope.jsonl"):
        read_problems(tmp_path / "nope.jsonl")


def test_reasoning360_humaneval_rows_with_empty_prompt_and_raw_prompt_load(tmp_path):
    path = tmp_path / "he.jsonl"
    rows = [
        {**GOOD, "prompt": [], "raw_prompt": "Write add(a, b)."},
        {**GOOD, "prompt": None, "raw_prompt": "x"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = read_problems(path)
    assert [p.prompt for p in got] == [
        [{"role": "user", "content": "Write add(a, b)."}],
        [{"role": "user", "content": "x"}],
    ]


def test_json_array_file_loads(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([GOOD, {**GOOD, "data_source": "e"}]))
    assert [p.data_source for p in read_problems(path)] == ["d", "e"]


def test_only_parquet_stores_structured_ground_truths_as_json_text_and_bad_rows_raise_by_default(tmp_path):
    from reasonrl.data.files import read_rows

    tests = {"inputs": ["1"], "outputs": ["2"]}
    probs = [Problem([{"role": "user", "content": "q"}], tests, "codegen", "code", {}),
             Problem([{"role": "user", "content": "q"}], "12", "math", "math", {})]  # fmt: skip
    write_problems(tmp_path / "p.jsonl", probs)
    raw = read_rows(tmp_path / "p.jsonl")  # jsonl holds the structure itself, as verl's files do
    assert raw[0]["reward_model"]["ground_truth"] == tests and "ground_truth_json" not in raw[0]["extra_info"]
    write_problems(tmp_path / "p.parquet", probs)
    raw = read_rows(tmp_path / "p.parquet")  # parquet: the dict as JSON text, flagged; a string as is
    assert (
        json.loads(raw[0]["reward_model"]["ground_truth"]) == tests
        and raw[0]["extra_info"]["ground_truth_json"]
    )
    assert raw[1]["reward_model"]["ground_truth"] == "12" and "ground_truth_json" not in raw[1]["extra_info"]
    assert [p.ground_truth for p in read_problems(tmp_path / "p.parquet")] == [tests, "12"]
    with open(tmp_path / "p.jsonl", "a") as f:
        f.write('{"prompt": "q"}\n')  # no reward_model
    with pytest.raises(ValueError, match="p.jsonl row 2"):
        load_problems([str(tmp_path / "p.jsonl")])  # not skipped unless asked
    assert len(read_problems(tmp_path / "p.jsonl", skip_bad=True)) == 2  # skipped without a report list


def test_a_byte_order_mark_is_not_part_of_the_first_row(tmp_path):
    """Windows tools write a UTF-8 byte-order mark before the first line (JSON lines, JSON, CSV)."""
    line = json.dumps(GOOD)
    for name, text in (("bom.jsonl", f"{line}\n{line}\n"), ("bom.json", f"[{line}]")):
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
        problems = read_problems(path)
        assert [p.user_text for p in problems] == [Problem.from_row(GOOD).user_text] * len(problems) != []
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfquestion,answer\n1+1?,2\n")
    assert read_rows(path) == [{"question": "1+1?", "answer": "2"}]


def test_a_nan_field_reads_as_an_absent_one(tmp_path):
    """pandas writes a missing value in a float column as NaN: a verl row's optional field that is NaN
    reads exactly as the row without it (no ability "nan", no error on a NaN extra_info), and a NaN
    required field is reported missing."""
    row = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "1+1?"}],
           "reward_model": {"style": "rule", "ground_truth": "2"}}  # fmt: skip
    plain = Problem.from_row(row)
    for key in ("ability", "extra_info", "apply_chat_template"):
        got = Problem.from_row({**row, key: float("nan")})
        assert got.to_row() == plain.to_row(), key
    assert Problem.from_row({**row, "ability": "math"}).ability == "math"
    for key in ("data_source", "reward_model"):
        with pytest.raises(ValueError, match=rf"^r: missing field\(s\) \['{key}'\]"):
            Problem.from_row({**row, key: float("nan")}, where="r")
    src = tmp_path / "d.parquet"  # as pandas leaves it: a float column of NaN
    pq.write_table(pa.Table.from_pylist([{**row, "ability": float("nan")}]), src)
    assert [p.to_row() for p in read_problems(src)] == [plain.to_row()]


def test_a_source_format_row_points_to_its_converter(tmp_path):
    """A row with none of verl's fields (a GSM8K file given as training data) names the fix; a verl row
    missing one field does not (it is a broken row, not another format)."""
    path = tmp_path / "gsm8k.jsonl"
    path.write_text(json.dumps({"question": "1+1?", "answer": "1+1=2\n#### 2"}) + "\n")
    with pytest.raises(ValueError) as e:
        read_problems(path)
    assert str(e.value) == (
        f"{path} row 0: missing field(s) ['data_source', 'prompt', 'reward_model']; a row needs data_source, prompt, "
        f"reward_model (a dataset in its own format? convert it first: reasonrl data prepare CONVERTER --input "
        f"{path} --out FILE.parquet; converters: reasonrl data list)"
    )
    path.write_text(json.dumps({k: v for k, v in GOOD.items() if k != "reward_model"}) + "\n")
    with pytest.raises(ValueError) as e:
        read_problems(path)
    assert "missing field(s) ['reward_model']" in str(e.value) and "convert" not in str(e.value)
    assert read_problems(path, skip_bad=True) == []  # skipped rows are counted, not explained
