"""Training-ready data out (issue 37): `export_study SLUG out.jsonl --format trl` writes rows the
`datasets` library loads as TRL reads them, with votes, agreement, the stated rule for ties and
disagreements and a dataset card; Parquet and a datasets directory too."""
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from annotation.services.members import study_membership_set
from annotation.services.studies import api_token_create, study_import
from tests.builders.bundles import bundle_bytes, chat_rows, rubric_rows


def voted_chat_study():
    rows = chat_rows(4, texts={"A": "Use `max(xs)`.", "B": "Sort, then take the last."})
    votes = {"chat-0": (1, 1, -1), "chat-1": (-1,), "chat-2": (0, 0), "chat-3": (1, -1)}
    for item, values in votes.items():
        rows += [{"kind": "human_preference", "item": item, "first": "A", "second": "B", "preference": v,
                  "annotator": f"w{n}"} for n, v in enumerate(values)]
    return study_import(source=bundle_bytes(rows), slug="voted", metric="")


def read_jsonl(path):
    return [json.loads(line) for line in open(path)]


@pytest.mark.django_db
def test_trl_rows_follow_the_majority_and_leave_ties_out(tmp_path):
    voted_chat_study()
    call_command("export_study", "voted", str(tmp_path / "out.jsonl"), "--format", "trl")
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert [(r["item"], r["chosen"], r["rejected"], r["votes_chosen"], r["votes_rejected"]) for r in rows] == [
        ("chat-0", "Use `max(xs)`.", "Sort, then take the last.", 2, 1),
        ("chat-1", "Sort, then take the last.", "Use `max(xs)`.", 1, 0)]
    assert rows[0]["prompt"] == "Question 0: how do I find the *largest* number?"  # a chat's turns, system aside
    assert rows[0]["agreement"] == pytest.approx(2 / 3) and rows[0]["chosen_system"] == "A"
    card = (tmp_path / "out.jsonl.README.md").read_text()
    assert "left out as ties or even splits" in card and "2 kept, 2 left out" in card
    assert "human only" in card and "γ = 0.05" in card
    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset("json", data_files=str(tmp_path / "out.jsonl"), split="train")
    assert loaded.column_names[:3] == ["prompt", "chosen", "rejected"] and len(loaded) == 2
    assert all(loaded.features[k].dtype == "string" for k in ("prompt", "chosen", "rejected"))


@pytest.mark.django_db
def test_conversational_kto_parquet_and_a_datasets_directory(tmp_path):
    datasets = pytest.importorskip("datasets")
    voted_chat_study()
    call_command("export_study", "voted", str(tmp_path / "conv.jsonl.gz"), "--format", "trl-conversational")
    conv = datasets.load_dataset("json", data_files=str(tmp_path / "conv.jsonl.gz"), split="train")
    assert conv[0]["prompt"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert conv[0]["chosen"] == [{"role": "assistant", "content": "Use `max(xs)`."}]
    call_command("export_study", "voted", str(tmp_path / "kto.parquet"), "--format", "kto")
    kto = datasets.Dataset.from_parquet(str(tmp_path / "kto.parquet"))
    assert kto.features["label"].dtype == "bool" and sorted(kto["label"]) == [False, False, True, True]
    call_command("export_study", "voted", str(tmp_path / "voted_prefs"), "--format", "trl", "--min-agreement", "0.75")
    saved = datasets.load_from_disk(str(tmp_path / "voted_prefs"))
    assert saved["item"] == ["chat-1"]  # chat-0's majority is 2 of 3 votes
    assert (tmp_path / "voted_prefs" / "README.md").read_text().startswith("---\ntags:")


@pytest.mark.django_db
def test_a_rubric_study_gives_one_row_per_criterion(tmp_path):
    study_import(source=bundle_bytes(rubric_rows(items=4, imported=2)), slug="rubric")
    call_command("export_study", "rubric", str(tmp_path / "r.jsonl"), "--format", "trl")
    rows = read_jsonl(tmp_path / "r.jsonl")
    # Imported: on two items, helpfulness A better (-1 for B/A order), correctness B better, style a tie.
    assert sorted((r["item"], r["criterion"], r["chosen_system"]) for r in rows) == [
        ("r00", "correctness", "B"), ("r00", "helpfulness", "A"), ("r01", "correctness", "B"),
        ("r01", "helpfulness", "A")]


@pytest.mark.django_db
def test_the_export_through_the_api_with_a_token(tmp_path):
    datasets = pytest.importorskip("datasets")
    study = voted_chat_study()
    user = User.objects.create_user("exporter")
    study_membership_set(study=study, user=user, role="researcher")
    token = api_token_create(user=user).key
    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Token {token}"}
    response = client.get("/api/studies/voted/export/?dataset=trl", **auth)
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    (tmp_path / "api.jsonl").write_bytes(response.content)
    loaded = datasets.load_dataset("json", data_files=str(tmp_path / "api.jsonl"), split="train")
    assert loaded["item"] == ["chat-0", "chat-1"] and loaded["chosen"][1] == "Sort, then take the last."
    parquet = client.get("/api/studies/voted/export/?dataset=kto&file=parquet", **auth)
    (tmp_path / "api.parquet").write_bytes(parquet.content)
    assert len(datasets.Dataset.from_parquet(str(tmp_path / "api.parquet"))) == 4
    card = client.get("/api/studies/voted/export/?dataset=trl&file=card", **auth).content.decode()
    assert "left out as ties or even splits" in card
    bundle = client.get("/api/studies/voted/export/", **auth).content.decode().splitlines()
    assert '"kind": "study"' in bundle[0] and sum('"human_preference"' in line for line in bundle) == 8
    assert client.get("/api/studies/voted/export/?dataset=dpo", **auth).status_code == 400
    assert client.get("/api/studies/voted/export/?dataset=trl").status_code == 401  # no token, no data
    # The CSV exports take the same token (they sent it to the login page).
    csv_response = client.get("/s/voted/export/judgements.csv", **auth)
    assert csv_response.status_code == 200 and csv_response["Content-Type"].startswith("text/csv")
    assert client.get("/s/voted/export/judgements.csv", HTTP_AUTHORIZATION="Token wrong").status_code in (401, 403)
