"""Dense retrieval for `reasonrl retriever CORPUS --dense MODEL`: passages and queries embedded by a text
encoder (e5, bge, contriever, ...; any `transformers` AutoModel), ranked by inner product, as Search-R1's
and FlashRAG's dense retrievers rank (Search-R1's recipes serve e5-base-v2 over wiki-18 this way).

Owns: the encoder (`Encoder`: the prefixes a retriever family was trained with, pooling, unit-length
embeddings; defaults by the model's name as Search-R1 / FlashRAG choose them: e5 "query: " / "passage: "
and mean pooling, bge its query instruction and the [CLS] token, DPR the pooler output unnormalised,
others mean pooling), the index of passage embeddings (`DenseIndex`: built by encoding the corpus,
or read from a file: a FAISS index such as Search-R1's `e5_Flat.index`, read with the optional
`faiss-cpu`, or a `.npy` matrix; a file that does not exist yet is written once built, atomically, so the
next start reads it), and search (FAISS's when the index is one, otherwise exact inner products in
chunks of the corpus). An index whose size or width does not match the corpus or the encoder is an
InputError naming the file before the service starts.
Does not own: the corpus (`retrieval_server.load_corpus`), the HTTP service (`retrieval_server.serve`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reasonrl.errors import InputError

BGE_QUERY = "Represent this sentence for searching relevant passages: "
POOLINGS = ("mean", "cls", "pooler")
CHUNK = 262_144  # corpus rows per matrix product in exact search (bounds its memory)


@dataclass
class EncoderSpec:
    """How `model` embeds text; `None` fields take the defaults of the model's family (module docstring)."""

    model: str
    pooling: str | None = None
    query_prefix: str | None = None
    passage_prefix: str | None = None
    normalize: bool | None = None
    max_length: int = 256
    batch_size: int = 128
    device: str = "auto"

    def resolved(self) -> EncoderSpec:
        name = self.model.lower()
        family = "e5" if "e5" in name else "bge" if "bge" in name else "dpr" if "dpr" in name else ""
        pooling = self.pooling or {"bge": "cls", "dpr": "pooler"}.get(family, "mean")
        if pooling not in POOLINGS:
            raise InputError(f"--pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        query, passage = {"e5": ("query: ", "passage: "), "bge": (BGE_QUERY, "")}.get(family, ("", ""))
        return EncoderSpec(
            self.model, pooling,
            query if self.query_prefix is None else self.query_prefix,
            passage if self.passage_prefix is None else self.passage_prefix,
            family != "dpr" if self.normalize is None else self.normalize,
            self.max_length, self.batch_size, self.device,
        )  # fmt: skip


class Encoder:
    """`encode(texts, query)` -> float32 [len(texts), width], one row a text, in batches."""

    def __init__(self, spec: EncoderSpec) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        from reasonrl.models.hub import is_hub_id, offline_unless_reachable

        self.spec = spec = spec.resolved()
        path = spec.model if is_hub_id(spec.model) else str(Path(spec.model).expanduser())
        offline_unless_reachable(spec.model)
        device = spec.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModel.from_pretrained(
                path, dtype=torch.float16 if device != "cpu" else torch.float32
            )
        except (OSError, ValueError) as e:
            raise InputError(f"retriever model {spec.model!r} cannot be loaded: {e}") from None
        self.tokenizer.padding_side = "right"  # the [CLS] token first in every row
        self.model.to(device).eval()
        self.device, self._torch = device, torch
        self.width = int(self.model.config.hidden_size)

    def encode(self, texts: list[str], query: bool) -> np.ndarray:
        torch, spec = self._torch, self.spec
        prefix = spec.query_prefix if query else spec.passage_prefix
        out = np.empty((len(texts), self.width), dtype=np.float32)
        for start in range(0, len(texts), spec.batch_size):
            batch = [prefix + t for t in texts[start : start + spec.batch_size]]
            inputs = self.tokenizer(batch, max_length=spec.max_length, padding=True, truncation=True,
                                    return_tensors="pt", return_token_type_ids=False)  # fmt: skip
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            with torch.inference_mode():
                output = self.model(**inputs, return_dict=True)
            out[start : start + len(batch)] = (
                self._pool(output, inputs["attention_mask"]).float().cpu().numpy()
            )
        return out

    def _pool(self, output, mask):
        torch, spec = self._torch, self.spec
        if spec.pooling == "pooler":
            if getattr(output, "pooler_output", None) is None:
                raise InputError(
                    f"retriever model {spec.model!r} has no pooler output: use --pooling mean or cls"
                )
            emb = output.pooler_output
        elif spec.pooling == "cls":
            emb = output.last_hidden_state[:, 0]
        else:
            hidden = output.last_hidden_state.masked_fill(~mask[..., None].bool(), 0.0)
            emb = hidden.sum(dim=1) / mask.sum(dim=1, keepdim=True).to(hidden.dtype)
        return torch.nn.functional.normalize(emb.float(), dim=-1) if spec.normalize else emb


def _faiss():
    try:
        import faiss
    except ImportError:
        raise InputError(
            "a FAISS index needs faiss: pip install 'reasonrl[search]' (or give a .npy file)"
        ) from None
    return faiss


class DenseIndex:
    """The passages' embeddings and search over them (module docstring); `search(queries, k)` -> per query
    [(doc, score)], best first."""

    kind = "dense"

    def __init__(self, docs: list[dict], encoder: Encoder, index_path: str | None = None, log=print) -> None:
        self.docs, self.encoder, self.lock = docs, encoder, threading.Lock()
        self.vectors, self.faiss_index = None, None
        path = Path(index_path) if index_path else None
        if path is not None and path.exists():
            self._read(path)
        else:
            log(f"reasonrl retriever: encoding {len(docs)} passages with {encoder.spec.model}", flush=True)
            self.vectors = encoder.encode([d["contents"] for d in docs], query=False)
            if path is not None:
                self._write(path)
                log(f"reasonrl retriever: wrote the index to {path}", flush=True)

    @property
    def size(self) -> tuple[int, int]:
        if self.faiss_index is not None:
            return int(self.faiss_index.ntotal), int(self.faiss_index.d)
        return self.vectors.shape

    def _read(self, path: Path) -> None:
        if path.suffix == ".npy":
            try:
                self.vectors = np.load(path, mmap_mode="r")
            except ValueError as e:
                raise InputError(f"{path}: not a numpy matrix of passage embeddings: {e}") from None
            if self.vectors.ndim != 2 or self.vectors.dtype != np.float32:
                raise InputError(f"{path}: passage embeddings must be a 2-D float32 matrix, "
                                 f"got {self.vectors.dtype} of shape {self.vectors.shape}")  # fmt: skip
        else:
            try:
                self.faiss_index = _faiss().read_index(str(path))
            except RuntimeError as e:
                raise InputError(f"{path}: not a FAISS index ({str(e).splitlines()[-1]})") from None
        rows, width = self.size
        if rows != len(self.docs):
            raise InputError(f"{path}: the index holds {rows} passages, the corpus {len(self.docs)}: "
                             "an index built over another corpus (or another version of it)")  # fmt: skip
        if width != self.encoder.width:
            raise InputError(f"{path}: the index's vectors have {width} dimensions, the model "
                             f"{self.encoder.spec.model!r} gives {self.encoder.width}: built with another model")  # fmt: skip

    def _write(self, path: Path) -> None:
        from reasonrl.data.files import replace_atomically

        if path.suffix == ".npy":

            def write(tmp: Path) -> None:
                with open(tmp, "wb") as f:
                    np.save(f, self.vectors)
        else:
            faiss = _faiss()
            index = faiss.IndexFlatIP(self.vectors.shape[1])
            index.add(self.vectors)
            self.faiss_index, self.vectors = index, None

            def write(tmp: Path) -> None:
                faiss.write_index(index, str(tmp))

        replace_atomically(path, write)

    def _top(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), each [len(queries), k], best first."""
        if self.faiss_index is not None:
            return self.faiss_index.search(queries, k)
        best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
        best_i = np.zeros((len(queries), 0), dtype=np.int64)
        for start in range(0, len(self.vectors), CHUNK):
            scores = queries @ np.asarray(self.vectors[start : start + CHUNK]).T
            part = np.argpartition(-scores, min(k, scores.shape[1]) - 1, axis=1)[:, :k]
            best_s = np.concatenate([best_s, np.take_along_axis(scores, part, 1)], 1)
            best_i = np.concatenate([best_i, part + start], 1)
            order = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
            best_s, best_i = np.take_along_axis(best_s, order, 1), np.take_along_axis(best_i, order, 1)
        return best_s, best_i

    def search(self, queries: list[str], k: int) -> list[list[tuple[dict, float]]]:
        k = min(k, len(self.docs))
        with self.lock:
            scores, ids = self._top(self.encoder.encode(queries, query=True), k)
        return [[(self.docs[int(i)], float(s)) for i, s in zip(row_i, row_s) if i >= 0]
                for row_i, row_s in zip(ids, scores)]  # fmt: skip
