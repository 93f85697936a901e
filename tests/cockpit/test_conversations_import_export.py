"""A chat study through the app: conversations and judge metadata stored and exported back."""
import pytest

from annotation import models
from annotation.selectors.exports import study_export_rows
from annotation.selectors.studies import study_metric_labels
from annotation.services.studies import study_import
from protocol.bundle import bundle_rows, read_bundle
from tests.builders.bundles import BUNDLES, CHAT_ROWS, bundle_bytes
from tests.builders.clients import researcher_client

pytestmark = pytest.mark.django_db


def test_chat_study_round_trips_through_the_app():
    study = study_import(source=bundle_bytes(CHAT_ROWS), metric="gpt35")
    assert study.text_format == "markdown"
    item = models.Item.objects.get(study=study)
    assert item.input_messages == CHAT_ROWS[1]["input"] and item.input.startswith("system: Be brief.")
    assert models.Output.objects.get(system__name="B").messages == CHAT_ROWS[3]["text"]
    # Canonical order is (A, B): the row given as (B, A) "AB" had B shown first -> stored as "BA".
    stored = sorted(models.MetricPreference.objects.values_list("order", "value", "judge", "prompt"))
    assert stored == [("AB", 1, "gpt-3.5-turbo", "pandalm-v1"), ("BA", -1, "gpt-3.5-turbo", "pandalm-v1")]
    exported = list(study_export_rows(study=study))
    assert exported == list(bundle_rows(read_bundle(bundle_bytes(exported))))
    again = study_import(source=bundle_bytes(exported), slug="again", metric="gpt35")
    assert list(study_export_rows(study=again)) == exported
    assert exported[0]["text_format"] == "markdown"
    assert exported[1]["input"] == CHAT_ROWS[1]["input"] and exported[3]["text"] == CHAT_ROWS[3]["text"]
    # The two orders disagree (each prefers the output shown first): the metric says tie.
    assert study_metric_labels(study=study) == {("A", "B"): {"c1": 0}}


def test_plain_study_exports_no_text_format_and_no_judge_fields(toy_rows):
    study = study_import(source=bundle_bytes(toy_rows))
    rows = list(study_export_rows(study=study))
    assert "text_format" not in rows[0]
    assert all(set(r) == {"kind", "item", "first", "second", "metric", "preference"}
               for r in rows if r["kind"] == "metric_preference")


def test_the_real_chat_demo_bundle_imports_and_exports_its_conversations_and_judges():
    study = study_import(source=BUNDLES / "pandalm_chat.jsonl.gz", slug="pandalm-chat", metric="gpt35")
    rows = list(study_export_rows(study=study))
    exported = read_bundle(bundle_bytes(rows))
    original = read_bundle(BUNDLES / "pandalm_chat.jsonl.gz")
    assert {(i.id, i.messages) for i in exported.items} == {(i.id, i.messages) for i in original.items}
    assert {(o.item, o.system, o.messages) for o in exported.outputs} == {
        (o.item, o.system, o.messages) for o in original.outputs}
    assert {(r.metric, r.judge, r.prompt) for r in exported.metric_preferences} == {
        (r.metric, r.judge, r.prompt) for r in original.metric_preferences}
    assert len(exported.metric_preferences) == 1973 and exported.study["text_format"] == "markdown"


def test_dashboard_and_api_show_the_judges_position_bias_and_human_agreement(client):
    rows = [*CHAT_ROWS, {"kind": "human_preference", "item": "c1", "first": "A", "second": "B", "preference": 1,
                    "annotator": "h1"}]
    study = study_import(source=bundle_bytes(rows), metric="gpt35")
    researcher_client(client, study)
    html = client.get(f"/s/{study.slug}/dashboard/").content.decode()
    table = html.split('id="judges"')[1].split("</table>")[0]
    # Two verdicts, both won by the output shown first; one comparison in both orders, flipped;
    # the combined verdict (a tie) disagrees with the human's A.
    assert ('<td data-label="Metric">gpt35</td><td data-label="Judge">gpt-3.5-turbo</td>'
            '<td data-label="Verdicts">2</td>') in table
    assert "1.000 <span" in table and "0.000 <span" in table
    judges = client.get(f"/api/studies/{study.slug}/").json()["judges"]
    assert judges == [{"metric": "gpt35", "judge": "gpt-3.5-turbo", "criterion": "", "verdicts": 2, "ordered": 2, "decisive": 2,
                       "first_position_share": 1.0, "both_orders": 1, "flip_rate": 1.0, "human_compared": 1,
                       "human_agreement": 0.0, "unparsed": 0,
                       # one comparison, human +, judge =: p_o = 0, p_e = 1 x 0 = 0, so κ = 0; the
                       # human's one label (+) never matched: balanced 0; one human label, no variance
                       "kappa": 0.0, "balanced_agreement": 0.0, "savings_pairs": 0, "savings_eta2": None,
                       "savings_uniform": None, "savings_active": None}]
