"""protocol.designs: the registry of pair designs, and the app asking it instead of naming a
design (issue 40)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from protocol.designs import DESIGNS, PairDesign, design_of, register
from protocol.study_settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def test_the_setting_offers_the_registered_designs_and_its_default_is_one():
    setting = SETTINGS["pair_design"]
    assert setting.values == ("all_pairs", "ranking", "active") == tuple(DESIGNS)
    assert setting.problem(setting.default) is None
    assert "all_pairs" in setting.bounds and setting.problem("sideways") is not None


@pytest.mark.parametrize("name, label, why", [
    ("", "Nameless", "no name"),
    ("much_too_long", "Long", "longer than 10"),
    ("unlabelled", "", "no label"),
    ("ranking", "Again", "registered already"),
])
def test_register_refuses_a_design_it_cannot_store(name, label, why):
    design = type("Toy", (PairDesign,), {"name": name, "label": label, "title": "toy"})()
    with pytest.raises(ValueError, match=why):
        register(design)
    assert DESIGNS.get(name) is not design


def test_an_unknown_name_is_refused_with_the_known_ones():
    with pytest.raises(KeyError, match="known: all_pairs, ranking, active"):
        design_of("sideways")


def test_the_ordering_designs_need_the_settings_their_statement_holds_under():
    ranking, active, all_pairs = design_of("ranking"), design_of("active"), design_of("all_pairs")
    kept = {"rule": "eprocess", "policy": "adaptive", "family": "none", "criteria": 1, "max_labels": 0}
    assert ranking.problems(**kept) == active.problems(**kept) == all_pairs.problems(**kept) == {}
    assert set(ranking.problems(**{**kept, "family": "ebh", "criteria": 2})) == {"family_control", "pair_design"}
    assert "γ / (k (k − 1) / 2)" in active.problems(**{**kept, "family": "ebh"})["family_control"]
    assert set(all_pairs.problems(**{**kept, "max_labels": 5})) == {"ranking_max_labels"}


def test_no_module_or_template_of_the_app_names_a_design():
    """Every place that varies by design asks Study.design (docs/tutorials/add-a-pair-design.md)."""
    naming = re.compile(r"pair_design ?(==|!=|in\b)|design ?== ?[\"']|\.ranks\b|ranks_actively")
    found = [f"{path.relative_to(ROOT)}:{n}" for folder in ("annotation", "templates")
             for path in (ROOT / folder).rglob("*") if path.suffix in (".py", ".html") and "migrations" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if naming.search(line)]
    assert found == []
