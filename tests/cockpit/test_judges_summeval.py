"""The Judges table on real data: GPT-3.5's SummEval relevance verdicts in both orders.

A slice of the shipped bundle (its first 10 documents, all 16 systems, both head-to-head
metrics and the expert ratings) is imported and the dashboard's Judges table is checked
against numbers computed from the raw source without the converter: GPT-3.5's response letter
(A = the summary shown first, B = the other, C = tie), which system was shown first, and the
three experts' relevance ratings. The constants below were computed that way (pandas, from
/work/shared/data/summeval); when that folder is present the test computes them again.
A bundle that combined the two orders shows no position bias ("order unknown") and one that
swapped "AB" and "BA" shows 100 / 219 first-position wins instead of 119 / 219.
"""
import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from annotation.services.studies import study_import
from tests.builders.bundles import BUNDLES, bundle_bytes
from tests.builders.clients import researcher_client

pytestmark = pytest.mark.django_db

SOURCE = Path("/work/shared/data/summeval")
DOCS = 10
ORDERS_METRIC = "llm_gpt35_h2h_orders"
# On the first 10 documents: 220 verdicts (11 pairs x 2 orders), 219 not a tie, 119 of them won
# by the summary shown first; 110 comparisons in both orders, 34 of them flipped with the order;
# the judge (orders combined, a flip is a tie) equals the sign of the experts' mean difference
# on 52 of 110.
# The confusion of the experts' sign (rows) and the judge's verdict (columns), +, =, - in the
# canonical pair order (the smaller system name first), gives Cohen's κ and balanced agreement.
EXPECTED = {"verdicts": 220, "ordered": 220, "decisive": 219, "first_wins": 119, "both_orders": 110,
            "flips": 34, "human_compared": 110, "agree": 52, "confusion": [[16, 11, 6], [8, 11, 7], [14, 12, 25]]}


def _slice() -> tuple[list[str], bytes]:
    rows = [json.loads(line) for line in gzip.open(BUNDLES / "summeval_relevance.jsonl.gz", "rt")]
    docs = [r["id"] for r in rows if r["kind"] == "item"][:DOCS]
    keep = [rows[0]] + [r for r in rows[1:] if (r["id"] if r["kind"] == "item" else r["item"]) in docs
                        and r["kind"] in ("item", "output", "metric_preference", "human_score")]
    return docs, bundle_bytes(keep)


def _from_source(docs: list[str]) -> dict:
    """The expected counts from the raw source files, without the converter's code."""
    verdicts = defaultdict(dict)  # (doc, model_1, model_2) -> shown_first -> +1 / 0 / -1 for model_1
    decisive = first_wins = 0
    with gzip.open(SOURCE / "llm_judge_pairwise_h2h.jsonl.gz", "rt") as fh:
        for line in fh:
            r = json.loads(line)
            if r["aspect"] != "relevance" or r["doc_id"] not in docs:
                continue
            letter = r["response"].strip()[0].upper()
            won_by_first = {"A": 1, "B": -1, "C": 0}[letter]
            decisive += letter != "C"
            first_wins += letter == "A"
            sign = 1 if r["shown_first"] == r["model_1"] else -1
            verdicts[(r["doc_id"], r["model_1"], r["model_2"])][r["shown_first"]] = won_by_first * sign
    ratings = {}
    with gzip.open(SOURCE / "summaries.jsonl.gz", "rt") as fh:
        for line in fh:
            s = json.loads(line)
            if s["doc_id"] in docs:
                experts = [e["relevance"] for e in s.get("expert_annotations") or []]
                ratings[(s["doc_id"], s["model_id"])] = sum(experts) / 3 if experts else s["expert_avg"]["relevance"]
    flips = agree = 0
    confusion = [[0, 0, 0], [0, 0, 0], [0, 0, 0]]  # rows the experts' sign, columns the judge's: +, =, -
    for (doc, a, b), by_first in verdicts.items():
        assert sorted(by_first) == sorted((a, b))
        va, vb = by_first[a], by_first[b]
        flips += va != vb
        judge = va if va == vb else 0
        diff = ratings[(doc, a)] - ratings[(doc, b)]
        human = (diff > 0) - (diff < 0)
        agree += judge == human
        # the canonical pair is (a, b) sorted by name; model_1 and model_2 may be either
        sign = 1 if a < b else -1
        confusion[1 - sign * human][1 - sign * judge] += 1
    n = sum(len(v) for v in verdicts.values())
    return {"verdicts": n, "ordered": n, "decisive": decisive, "first_wins": first_wins,
            "both_orders": len(verdicts), "flips": flips, "human_compared": len(verdicts), "agree": agree,
            "confusion": confusion}


@pytest.mark.skipif(not SOURCE.is_dir(), reason="the SummEval source folder is not here")
def test_expected_numbers_come_from_the_raw_source():
    docs, _ = _slice()
    assert _from_source(docs) == EXPECTED


def test_judges_table_shows_gpt35_position_bias_and_agreement_on_summeval(client):
    _, data = _slice()
    study = study_import(source=data, slug="summeval-judges", metric=ORDERS_METRIC)
    researcher_client(client, study)
    judges = {j["metric"]: j for j in client.get(f"/api/studies/{study.slug}/").json()["judges"]}
    e = EXPECTED
    assert judges[ORDERS_METRIC] == {
        "metric": ORDERS_METRIC, "judge": "gpt-3.5-turbo-0301", "criterion": "", "verdicts": e["verdicts"], "ordered": e["ordered"],
        "decisive": e["decisive"], "first_position_share": e["first_wins"] / e["decisive"],
        "both_orders": e["both_orders"], "flip_rate": e["flips"] / e["both_orders"],
        "human_compared": e["human_compared"], "human_agreement": e["agree"] / e["human_compared"],
        **{k: judges[ORDERS_METRIC][k] for k in ("kappa", "balanced_agreement", "unparsed", "savings_pairs",
                                                 "savings_eta2", "savings_uniform", "savings_active")}}
    c, n = e["confusion"], e["human_compared"]
    observed = sum(c[k][k] for k in range(3)) / n
    chance = sum(sum(c[k]) * sum(row[k] for row in c) for k in range(3)) / n ** 2
    assert judges[ORDERS_METRIC]["kappa"] == pytest.approx((observed - chance) / (1 - chance))
    assert judges[ORDERS_METRIC]["balanced_agreement"] == pytest.approx(sum(c[k][k] / sum(c[k]) for k in range(3)) / 3)
    assert judges[ORDERS_METRIC]["unparsed"] == 0
    # 11 pairs of 10 documents, each pair's experts varying: the bound is estimated on all of them
    assert judges[ORDERS_METRIC]["savings_pairs"] == 11
    assert 0 < judges[ORDERS_METRIC]["savings_active"] <= judges[ORDERS_METRIC]["savings_uniform"] <= 1
    # The combined metric (one row per comparison, no order) cannot show a position bias.
    combined = judges["llm_gpt35_h2h"]
    assert (combined["verdicts"], combined["ordered"], combined["first_position_share"], combined["flip_rate"]) == (
        110, 0, None, None)

    html = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    table = html.split('id="judges"')[1].split("</table>")[0]
    row = next(r for r in table.split("<tr>") if f">{ORDERS_METRIC}</td>" in r)
    assert '"Judge">gpt-3.5-turbo-0301</td><td data-label="Verdicts">220</td>' in row
    assert '0.543 <span class="muted">of 219</span>' in row  # 119 / 219 won by the first position
    assert '0.309 <span class="muted">of 110</span>' in row  # 34 / 110 flipped with the order
    assert '0.473 <span class="muted">of 110</span>' in row  # 52 / 110 agree with the experts
