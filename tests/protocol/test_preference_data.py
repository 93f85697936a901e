"""Preference data for training (protocol/preference_data.py): TRL's formats, the stated rule
for ties and disagreements, and datasets that the `datasets` library loads as TRL expects."""
import json

import pytest

from protocol.preference_data import ComparisonVotes, preference_rows, verdict

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Largest prime below 10?"}]


def comparisons():
    return [
        ComparisonVotes("i1", "Capital of France?", "A", "B", "Paris.", "Lyon.", (1, 1, -1)),
        ComparisonVotes("i2", "2+2?", "A", "B", "5", "4", (-1,)),
        ComparisonVotes("i3", "Colour of sky?", "A", "B", "Blue", "Blue!", (0, 0)),      # ties: left out
        ComparisonVotes("i4", "Best pet?", "A", "B", "Cat", "Dog", (1, -1)),             # even split: left out
        ComparisonVotes("i5", CHAT, "A", "C", [{"role": "assistant", "content": "7"}],
                        [{"role": "assistant", "content": "9"}], (1, 0)),
    ]


def test_the_majority_is_chosen_and_ties_and_even_splits_are_left_out():
    rows, summary = preference_rows(comparisons())
    assert [(r["item"], r["chosen"], r["rejected"]) for r in rows] == [
        ("i1", "Paris.", "Lyon."), ("i2", "4", "5"), ("i5", "7", "9")]
    assert rows[0] | {} == {"prompt": "Capital of France?", "chosen": "Paris.", "rejected": "Lyon.", "item": "i1",
                            "chosen_system": "A", "rejected_system": "B", "votes_chosen": 2, "votes_rejected": 1,
                            "votes_tie": 0, "agreement": pytest.approx(2 / 3)}
    assert rows[2]["prompt"] == "Largest prime below 10?"  # a chat's user turns, system prompt aside
    assert summary == {"comparisons": 5, "with_a_winner": 3, "left_out_ties": 2, "left_out_below_agreement": 0,
                       "rows": 3}
    strict, summary = preference_rows(comparisons(), min_agreement=0.75)
    assert [r["item"] for r in strict] == ["i2"] and summary["left_out_below_agreement"] == 2


def test_swapping_the_systems_keeps_the_same_chosen_answer():
    c = comparisons()[0]
    swapped = ComparisonVotes(c.item, c.prompt, c.second_system, c.first_system, c.second_text, c.first_text,
                              tuple(-v for v in c.votes))
    assert preference_rows([c])[0] == preference_rows([swapped])[0]
    assert verdict((1, -1, 0)).winner == 0 and verdict(()).winner == 0


def test_conversational_and_unpaired_forms():
    rows, _ = preference_rows(comparisons(), form="trl-conversational")
    assert rows[2]["prompt"] == CHAT and rows[2]["chosen"] == [{"role": "assistant", "content": "7"}]
    assert rows[0]["prompt"] == [{"role": "user", "content": "Capital of France?"}]
    kto, summary = preference_rows(comparisons(), form="kto")
    assert [(r["item"], r["completion"], r["label"]) for r in kto[:2]] == [("i1", "Paris.", True), ("i1", "Lyon.", False)]
    assert summary["rows"] == 6
    with pytest.raises(ValueError, match="unknown format"):
        preference_rows([], form="dpo")


@pytest.mark.parametrize("form", ["trl", "trl-conversational", "kto"])
def test_the_datasets_library_loads_them_with_the_features_trl_reads(tmp_path, form):
    datasets = pytest.importorskip("datasets")
    rows, _ = preference_rows(comparisons(), form=form)
    path = tmp_path / f"{form}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = datasets.load_dataset("json", data_files=str(path), split="train")
    features = loaded.features
    if form == "trl":
        assert {k: features[k].dtype for k in ("prompt", "chosen", "rejected")} == dict.fromkeys(
            ("prompt", "chosen", "rejected"), "string")
    elif form == "trl-conversational":
        # TRL's is_conversational: a list of {"role", "content"} messages under the key.
        for key in ("prompt", "chosen", "rejected"):
            assert isinstance(loaded[0][key], list) and set(loaded[0][key][0]) == {"role", "content"}
    else:
        assert features["label"].dtype == "bool" and features["completion"].dtype == "string"
    assert len(loaded) == len(rows)
