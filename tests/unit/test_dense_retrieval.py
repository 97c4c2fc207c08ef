"""Dense retrieval (`reasonrl retriever CORPUS --dense MODEL`): a tiny BERT encoder saved here embeds as
Search-R1's encoder does (prefix, masked mean pooling, unit length; checked against the model run by
hand), exact search ranks by inner product across corpus chunks, the passages' embeddings are written to
and read from a `.npy` file or a FAISS index (one built as Search-R1 builds `e5_Flat.index` is read), an
index of another corpus or model is refused naming the file, and the service answers the search tool."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from reasonrl.errors import InputError
from reasonrl.models.tiny import build_tokenizer
from reasonrl.rollout import dense_retrieval
from reasonrl.rollout.dense_retrieval import BGE_QUERY, DenseIndex, Encoder, EncoderSpec
from reasonrl.rollout.retrieval_server import load_corpus, serving

TEXTS = ['"France"\nParis is the capital of France.', '"Germany"\nBerlin is the capital of Germany.',
         '"Sums"\n12+7 is 19.', '"Cats"\nCats sleep a lot, often sixteen hours a day.', '"Rivers"\nThe Seine.',
         '"Italy"\nRome is the capital of Italy.', '"Spain"\nMadrid.']  # fmt: skip


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    from transformers import BertConfig, BertModel

    tok = build_tokenizer(TEXTS + ["query: passage: capital"], 120)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, pad_token_id=tok.pad_token_id)  # fmt: skip
    out = tmp_path_factory.mktemp("tiny-e5-encoder")
    BertModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("\n".join(json.dumps({"id": str(i), "contents": t}) for i, t in enumerate(TEXTS)))
    return load_corpus(str(path))


def _same(a, b) -> bool:
    """Whether two searches' answers rank the same passages with the same scores (to float rounding)."""
    return all([d["id"] for d, _ in x] == [d["id"] for d, _ in y]
               and np.allclose([s for _, s in x], [s for _, s in y], atol=1e-5) for x, y in zip(a, b, strict=True))  # fmt: skip


def _encoder(encoder_dir, **kw) -> Encoder:
    return Encoder(EncoderSpec(encoder_dir, device="cpu", **kw))


def test_defaults_follow_the_model_family_and_explicit_settings_win():
    e5 = EncoderSpec("intfloat/e5-base-v2").resolved()
    assert (e5.pooling, e5.query_prefix, e5.passage_prefix, e5.normalize) == (
        "mean",
        "query: ",
        "passage: ",
        True,
    )
    bge = EncoderSpec("BAAI/bge-large-en-v1.5").resolved()
    assert (bge.pooling, bge.query_prefix, bge.passage_prefix, bge.normalize) == ("cls", BGE_QUERY, "", True)
    dpr = EncoderSpec("facebook/dpr-question_encoder-single-nq-base").resolved()
    assert (dpr.pooling, dpr.query_prefix, dpr.normalize) == ("pooler", "", False)
    other = EncoderSpec("facebook/contriever").resolved()
    assert (other.pooling, other.query_prefix, other.passage_prefix, other.normalize) == (
        "mean",
        "",
        "",
        True,
    )
    mine = EncoderSpec("intfloat/e5-base-v2", pooling="cls", query_prefix="", normalize=False).resolved()
    assert (mine.pooling, mine.query_prefix, mine.passage_prefix, mine.normalize) == (
        "cls",
        "",
        "passage: ",
        False,
    )
    with pytest.raises(InputError, match="--pooling must be one of mean, cls, pooler, got 'max'"):
        EncoderSpec("x", pooling="max").resolved()


def test_the_encoder_embeds_as_the_model_run_by_hand(encoder_dir):
    from transformers import AutoModel, AutoTokenizer

    enc = _encoder(encoder_dir, batch_size=2)  # "e5" in the directory's name: e5's prefixes, mean pooling
    assert (enc.spec.query_prefix, enc.spec.pooling) == ("query: ", "mean")
    texts = TEXTS[:3]  # different lengths: padding in a batch, two batches
    got = enc.encode(texts, query=True)
    tok, model = AutoTokenizer.from_pretrained(encoder_dir), AutoModel.from_pretrained(encoder_dir).eval()
    for text, row in zip(texts, got):
        ids = tok("query: " + text, return_tensors="pt", return_token_type_ids=False)
        with torch.no_grad():
            mean = model(**ids).last_hidden_state[0].mean(0)
        assert np.allclose(row, (mean / mean.norm()).numpy(), atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    passages = enc.encode(texts, query=False)  # another prefix: other vectors
    assert not np.allclose(passages, got, atol=1e-3)
    cls = _encoder(encoder_dir, pooling="cls", query_prefix="", normalize=False).encode(texts[:1], query=True)
    with torch.no_grad():
        first = model(**tok(texts[0], return_tensors="pt", return_token_type_ids=False)).last_hidden_state[
            0, 0
        ]
    assert np.allclose(cls[0], first.numpy(), atol=1e-5)


def test_a_passage_finds_itself_first_and_scores_are_inner_products(encoder_dir, docs, monkeypatch):
    enc = _encoder(encoder_dir, query_prefix="", passage_prefix="")  # a query equal to a passage embeds equal
    index = DenseIndex(docs, enc, log=lambda *a, **k: None)
    hits = index.search(TEXTS, 3)
    assert [row[0][0]["id"] for row in hits] == [str(i) for i in range(len(TEXTS))]
    assert all(abs(row[0][1] - 1.0) < 1e-5 for row in hits)
    q = enc.encode(TEXTS, query=True)
    brute = q @ index.vectors.T
    for i, row in enumerate(hits):
        assert [int(d["id"]) for d, _ in row] == list(np.argsort(-brute[i], kind="stable")[:3])
        assert np.allclose([s for _, s in row], np.sort(brute[i])[::-1][:3], atol=1e-5)
    monkeypatch.setattr(dense_retrieval, "CHUNK", 2)  # the corpus in 4 chunks: the same top 3, ids offset
    assert _same(index.search(TEXTS, 3), hits)
    assert [len(r) for r in index.search(TEXTS[:1], 50)] == [len(TEXTS)]  # k capped at the corpus


@pytest.mark.parametrize("name", ["emb.npy", "e5_Flat.index"])
def test_the_index_file_is_written_once_and_read_back(encoder_dir, docs, tmp_path, name):
    enc = _encoder(encoder_dir)
    path = tmp_path / "sub" / name
    lines = []
    built = DenseIndex(docs, enc, str(path), log=lambda *a, **k: lines.append(a[0]))
    assert path.is_file() and len(lines) == 2 and f"wrote the index to {path}" in lines[1]
    assert [p.name for p in path.parent.iterdir()] == [name]  # no temp file left
    real = enc.encode
    enc.encode = lambda texts, query: real(texts, query) if query else pytest.fail("re-encoded the corpus")
    read = DenseIndex(docs, enc, str(path), log=lambda *a, **k: pytest.fail("logged a build"))
    assert (read.faiss_index is not None) == (name.endswith(".index"))
    queries = ["capital of France", "Cats sleep", "12+7"]
    assert _same(read.search(queries, 2), built.search(queries, 2))


def test_an_index_built_as_search_r1_builds_it_is_read(encoder_dir, docs, tmp_path):
    import faiss

    enc = _encoder(encoder_dir)
    vectors = enc.encode([d["contents"] for d in docs], query=False)
    index = faiss.IndexFlatIP(vectors.shape[1])  # Search-R1's index_builder: "Flat", inner product
    index.add(vectors)
    faiss.write_index(index, str(tmp_path / "e5_Flat.index"))
    exact = DenseIndex(docs, enc, log=lambda *a, **k: None)
    served = DenseIndex(docs, enc, str(tmp_path / "e5_Flat.index"))
    assert _same(served.search(TEXTS, 4), exact.search(TEXTS, 4))


def test_an_index_of_another_corpus_or_model_is_refused_naming_the_file(encoder_dir, docs, tmp_path):
    import faiss

    enc = _encoder(encoder_dir)
    np.save(tmp_path / "short.npy", np.zeros((len(docs) - 1, 32), dtype=np.float32))
    with pytest.raises(InputError, match=r"short.npy: the index holds 6 passages, the corpus 7"):
        DenseIndex(docs, enc, str(tmp_path / "short.npy"))
    np.save(tmp_path / "wide.npy", np.zeros((len(docs), 48), dtype=np.float32))
    with pytest.raises(
        InputError, match=r"wide.npy: the index's vectors have 48 dimensions, the model .* gives 32"
    ):
        DenseIndex(docs, enc, str(tmp_path / "wide.npy"))
    np.save(tmp_path / "ints.npy", np.zeros((len(docs), 32), dtype=np.int64))
    with pytest.raises(InputError, match=r"ints.npy: passage embeddings must be a 2-D float32 matrix"):
        DenseIndex(docs, enc, str(tmp_path / "ints.npy"))
    index = faiss.IndexFlatIP(32)
    index.add(np.zeros((3, 32), dtype=np.float32))
    faiss.write_index(index, str(tmp_path / "small.index"))
    with pytest.raises(InputError, match=r"small.index: the index holds 3 passages, the corpus 7"):
        DenseIndex(docs, enc, str(tmp_path / "small.index"))
    (tmp_path / "junk.index").write_text("not an index")
    with pytest.raises(InputError, match=r"junk.index: not a FAISS index"):
        DenseIndex(docs, enc, str(tmp_path / "junk.index"))
    with pytest.raises(InputError, match=r"retriever model '.*nowhere' cannot be loaded"):
        Encoder(EncoderSpec(str(tmp_path / "nowhere"), device="cpu"))


def test_the_service_answers_the_search_tool_from_the_dense_index(encoder_dir, docs):
    from reasonrl.config import SearchToolConfig
    from reasonrl.rollout.search_tool import search

    index = DenseIndex(
        docs, _encoder(encoder_dir, query_prefix="", passage_prefix=""), log=lambda *a, **k: None
    )
    with serving(index) as url:
        ((text, status),) = search(SearchToolConfig(url=url, topk=1, retries=0), [[TEXTS[3]]], "search_r1")
    assert (
        status == "success"
        and text.strip() == "Doc 1(Title: Cats) Cats sleep a lot, often sixteen hours a day."
    )


def test_reasonrl_retriever_dense_builds_its_index_then_reads_it(encoder_dir, docs, tmp_path):
    import urllib.request

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in docs))
    cmd = [sys.executable, "-m", "reasonrl.cli.main", "retriever", str(corpus), "--port", "0",
           "--dense", encoder_dir, "--index", str(tmp_path / "emb.npy"), "--device", "cpu"]  # fmt: skip
    for start in ("built", "read"):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lines = [proc.stdout.readline() for _ in range(3 if start == "built" else 1)]
            assert f"7 passages of {corpus}, dense ({encoder_dir})" in lines[-1], lines + [proc.stderr.read()]
            assert ("encoding 7 passages" in lines[0]) == (start == "built")
            url = lines[-1].split("POST ")[1].split()[0]
            req = urllib.request.Request(url, json.dumps({"queries": ["Paris capital"], "topk": 2}).encode())
            with urllib.request.urlopen(req, timeout=30) as r:
                assert len(json.load(r)["result"][0]) == 2
        finally:
            proc.kill()
            proc.wait(timeout=30)
            proc.stdout.close()
            proc.stderr.close()


@pytest.mark.parametrize(("args", "message"), [
    (["--index", "x.npy"], "--index is the dense retriever's passage embeddings: give --dense MODEL too"),
    (["--pooling", "cls", "--no-normalize"], "--pooling, --no-normalize: settings of the dense retriever"),
])  # fmt: skip
def test_dense_settings_without_a_dense_model_are_an_error(tmp_path, capsys, args, message):
    from reasonrl.cli.main import main

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"contents": "x"}))
    assert main(["retriever", str(corpus), *args]) == 2
    assert message in capsys.readouterr().err


def test_the_benchmark_runs_and_exact_search_agrees_with_faiss():
    from pathlib import Path

    bench = Path(__file__).parents[2] / "bench" / "dense_retrieval.py"
    out = subprocess.run([sys.executable, str(bench), "--passages", "3000", "--dim", "64", "--queries", "32",
                          "--encode", "4", "--tokens", "16"], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["topk_agreement"] == 1.0 and result["passages"] == 3000
    assert result["numpy_qps"] > 0 and result["faiss_flat_qps"] > 0 and result["encoder_passages_per_s"] > 0
