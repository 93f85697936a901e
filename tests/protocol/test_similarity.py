import math

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from protocol.similarity import (
    embeddings_available,
    find_embedding_model,
    get_similarity,
    length_penalty,
    similarity_names,
)

TEXTS = [
    "A photo of a cat on stairs has sparked a debate on social media about whether the cat is going up or down.",
    "A photo of a cat on stairs has gone viral, with people debating whether the cat is going up or down.",
    "Evan needs to cancel his lesson tomorrow due to the flu and will be unavailable until next Thursday.",
    "Evan cancels his lesson with Dennis due to having the flu and plans to reschedule for the following week.",
    "Chris tried jogging and did quite well despite eating less than he should.",
    "Running, runners and ran: stemming matters!",
]
PAIRS = [(a, b) for a in TEXTS for b in TEXTS]
CHEAP = [n for n in similarity_names() if "cosine" not in n]

words = st.sampled_from("the cat sat on a mat dog ran far away quickly Evan Dennis flu 42 , .".split())
texts = st.lists(words, min_size=1, max_size=12).map(" ".join)


def test_rouge1_matches_rouge_score_package():
    reference = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    expected = [reference.score(b, a)["rouge1"].fmeasure for a, b in PAIRS]
    got = get_similarity("rouge1")([a for a, _ in PAIRS], [b for _, b in PAIRS])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_bleu_is_sacrebleu_sentence_bleu_with_the_shorter_text_as_candidate():
    expected = []
    for a, b in PAIRS:
        shorter, longer = sorted((a, b), key=lambda t: (len(t), t))
        expected.append(sacrebleu.sentence_bleu(shorter, [longer]).score / 100)
    got = get_similarity("bleu")([a for a, _ in PAIRS], [b for _, b in PAIRS])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_token_jaccard_by_hand():
    sim = get_similarity("token_jaccard")
    # {the, cat, sat} vs {the, cat, ran, far}: 2 shared of 5
    assert sim(["The cat sat."], ["the cat ran far"])[0] == pytest.approx(2 / 5)
    assert sim(["...!"], ["?"])[0] == 1.0


def test_length_adjusted_by_hand():
    # 3 against 6 tokens: penalty exp(1 - 6/3) = e^-1 times the base similarity
    a, b = "cat sat down", "cat sat down on the mat"
    assert length_penalty(a, b) == pytest.approx(math.exp(-1))
    base = get_similarity("rouge1")([a], [b])[0]
    assert get_similarity("length_adjusted_rouge1")([a], [b])[0] == pytest.approx(math.exp(-1) * base)
    assert length_penalty("", "") == 1.0 and length_penalty("", "x") == 0.0


@pytest.mark.parametrize("name", CHEAP)
def test_identical_texts_are_maximally_similar(name):
    assert np.allclose(get_similarity(name)(TEXTS, TEXTS), 1.0)


@pytest.mark.parametrize("name", CHEAP)
def test_batched_equals_one_pair_at_a_time_and_cache_holds_unique_pairs(name):
    batched = get_similarity(name)
    got = batched([a for a, _ in PAIRS] * 2, [b for _, b in PAIRS] * 2)
    single = [get_similarity(name)([a], [b])[0] for a, b in PAIRS]
    np.testing.assert_allclose(got, single * 2, rtol=0, atol=1e-12)
    assert len(batched._cache) == len(TEXTS) * (len(TEXTS) + 1) // 2  # unordered pairs incl. self


@pytest.mark.parametrize("name", CHEAP)
@settings(max_examples=40, deadline=None)
@given(a=st.lists(texts, min_size=1, max_size=5), b=st.lists(texts, min_size=1, max_size=5))
def test_property_symmetric_and_bounded(name, a, b):
    n = min(len(a), len(b))
    sim = get_similarity(name)
    forward = sim(a[:n], b[:n])
    backward = get_similarity(name)(b[:n], a[:n])
    np.testing.assert_allclose(forward, backward, rtol=0, atol=1e-12)
    assert np.all((forward >= 0) & (forward <= 1 + 1e-12))


def test_bad_input_raises():
    sim = get_similarity("rouge1")
    with pytest.raises(ValueError, match="same length"):
        sim(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="sequences"):
        sim("abc", "abd")
    with pytest.raises(ValueError, match="not a text"):
        sim(["a", None], ["a", "b"])
    with pytest.raises(ValueError, match="unknown similarity"):
        get_similarity("bertscore")


def test_missing_embedding_package_is_a_clear_import_error():
    with pytest.raises(ImportError, match="not installed"):
        find_embedding_model("no_such_embedding_package_xyz")


@pytest.mark.skipif(not embeddings_available(), reason="optional embedding requirements not installed")
def test_cosine_of_paraphrases_beats_unrelated_texts():
    sim = get_similarity("cosine")
    scores = sim([TEXTS[0], TEXTS[0], TEXTS[0]], [TEXTS[0], TEXTS[1], TEXTS[2]])
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert scores[1] > scores[2]


def make_model_package(root, name, *, zipped, unsafe=False):
    import zipfile

    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('the package must not be imported')\n")
    files = {"modules.json": "[]", "config.json": "{}", "1_Pooling/config.json": "{}"}
    if unsafe:
        files["../evil.txt"] = "x"
    if zipped:
        with zipfile.ZipFile(package / "model.zip", "w") as archive:
            for member, text in files.items():
                archive.writestr(member, text)
    else:
        for member, text in files.items():
            (package / "model" / member).parent.mkdir(parents=True, exist_ok=True)
            (package / "model" / member).write_text(text)


def test_embedding_model_found_in_an_installed_package_without_importing_it(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("EVALAPP_EMBEDDING_CACHE", str(tmp_path / "cache"))
    make_model_package(tmp_path, "fake_unpacked_model", zipped=False)
    assert find_embedding_model("fake_unpacked_model") == tmp_path / "fake_unpacked_model" / "model"

    make_model_package(tmp_path, "fake_zipped_model", zipped=True)
    unpacked = find_embedding_model("fake-zipped-model")
    assert (unpacked / "modules.json").exists() and (unpacked / "1_Pooling" / "config.json").exists()
    assert unpacked.parent == tmp_path / "cache"
    assert find_embedding_model("fake_zipped_model") == unpacked  # unpacked once, then reused

    make_model_package(tmp_path, "fake_unsafe_model", zipped=True, unsafe=True)
    with pytest.raises(ImportError, match="unsafe"):
        find_embedding_model("fake_unsafe_model")
