"""What many tests build: bundles, workers, clients and the steps of the serving loop.

Test modules import from here (and from conftest's fixtures), never from each other, so a
test file can move or go without breaking another. Sections follow the test folders.
"""
from __future__ import annotations

import gzip
import io
import itertools
import json
import random
import re
import socket
import threading
import time
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.utils import timezone

from redis.exceptions import ConnectionError as RedisConnectionError
from rest_framework.test import APIClient

from annotation import jobs
from annotation.access import RESEARCHER_GROUP
from annotation.models import Annotator, Assignment, Comparison, Item, Output, PairState, Study
from annotation.services import hits, quality, study_import, study_membership_set
from protocol.bundle import write_bundle_rows

REPO = Path(__file__).resolve().parent.parent
BUNDLES = REPO / "data" / "bundles"
REDIS = ("127.0.0.1", 6379)


# ---- bundles -------------------------------------------------------------------------------

# An SQL statement that writes (GET never writes: tests/serving/test_get_never_writes.py).
WRITE_STATEMENT = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


def bundle_bytes(rows) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n").encode()


def bundle_slice(path, *, items: int, systems: int, **study_settings) -> bytes:
    """The study line of a shipped bundle with its first ``items`` items and the outputs of its
    first ``systems`` systems (by name), as bundle bytes; ``study_settings`` update the study line."""
    import gzip

    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    keep = {r["id"] for r in rows if r["kind"] == "item"}
    keep = set(sorted(keep, key=[r.get("id") for r in rows].index)[:items])
    names = sorted({r["system"] for r in rows if r["kind"] == "output"})[:systems]
    study = {**rows[0], **study_settings}
    return bundle_bytes([study] + [r for r in rows if r["kind"] == "item" and r["id"] in keep] + [
        r for r in rows if r["kind"] == "output" and r["item"] in keep and r["system"] in names
        and r.get("sample", 0) == 0])


#: true quality of the crowd study's systems: A beats B and C, B and C are a tie
QUALITY = {"A": 3.0, "B": 2.0, "C": 1.9}


def crowd_rows(items=40, batch=5, budget=90):
    """A 3-system crowd study with a metric that mostly agrees with QUALITY."""
    rng = random.Random(7)
    rows = [{"kind": "study", "name": "Crowd study", "criterion": "quality", "instructions": "Pick the better.",
             "batch_size": batch, "budget": budget, "metric": "m", "completion_code": "C0DE42"}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in QUALITY]
    rows += [{"kind": "metric_score", "item": f"i{n:02d}", "system": s, "metric": "m",
              "score": QUALITY[s] + rng.gauss(0, 0.5)} for n in range(items) for s in QUALITY]
    return rows


def many_systems_rows(k: int, items: int = 3):
    """k systems (sys00, sys01, ...) on ``items`` items, a metric ranking them in that order."""
    systems = [f"sys{n:02d}" for n in range(k)]
    rows = [{"kind": "study", "name": f"Arena {k}", "batch_size": 2, "budget": 100, "metric": "m"}]
    rows += [{"kind": "item", "id": f"i{n}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n}", "system": s, "text": f"{s} {n}"} for n in range(items) for s in systems]
    rows += [{"kind": "metric_score", "item": f"i{n}", "system": s, "metric": "m", "score": k - j + 0.1 * n}
             for n in range(items) for j, s in enumerate(systems)]
    return rows


def one_pair_rows(items=12, batch=1, budget=1):
    """Two systems, no metric: one pair."""
    rows = [{"kind": "study", "name": "One pair", "batch_size": batch, "budget": budget}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in ("A", "B")]
    return rows


def weighted_study(choice):
    """A one-pair study whose items' separability rises with their position, chosen by ``choice``."""
    study = study_import(source=bundle_bytes(one_pair_rows(items=20, batch=8, budget=8)))
    Study.objects.filter(pk=study.pk).update(item_choice=choice, item_choice_temperature=0.25)
    study.refresh_from_db()
    comparisons = comparisons_stored(study)
    for n, c in enumerate(comparisons):
        c.separability = n / len(comparisons)
    Comparison.objects.bulk_update(comparisons, ["separability"])
    return study


def comparisons_stored(study):
    """Every pair's comparison of every item of ``study``, stored now where it is not yet (as
    the separability job stores the scored ones; serving stores the others when it first leases
    them), ordered by pair and item position."""
    outputs = set(Output.objects.filter(item__study=study).values_list("item_id", "system_id"))
    rows = [Comparison(study=study, item_id=item_id, first_id=pair.first_id, second_id=pair.second_id, pair=pair)
            for pair in PairState.objects.filter(study=study).order_by("id")
            for item_id in Item.objects.filter(study=study).order_by("position").values_list("id", flat=True)
            if (item_id, pair.first_id) in outputs and (item_id, pair.second_id) in outputs]
    Comparison.objects.bulk_create(rows, ignore_conflicts=True)
    return list(Comparison.objects.filter(study=study).order_by("pair_id", "item__position"))


SCRIPT = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=2">'
HOSTILE_SYSTEMS = (SCRIPT, IMG, "=HYPERLINK(\"http://x\")", "+cmd|calc", "-2+3", "@SUM(1)")


def hostile_rows(n_items=4):
    """A study whose item ids, inputs, outputs, system and annotator names are attacks."""
    rows = [{"kind": "study", "name": f"Study {SCRIPT}", "criterion": IMG, "instructions": SCRIPT,
             "batch_size": 2, "metric": "m", "completion_code": "CODE"}]
    items = [f"{SCRIPT}{n}" if n % 2 else f"=1+{n}" for n in range(n_items)]
    rows += [{"kind": "item", "id": item, "input": f"{IMG} input {n}"} for n, item in enumerate(items)]
    rows += [{"kind": "output", "item": item, "system": s, "text": f"{SCRIPT} {IMG} {k}"}
             for item in items for k, s in enumerate(HOSTILE_SYSTEMS)]
    rows += [{"kind": "metric_score", "item": item, "system": s, "metric": "m", "score": float(k)}
             for item in items for k, s in enumerate(HOSTILE_SYSTEMS)]
    rows += [{"kind": "human_preference", "item": items[0], "first": HOSTILE_SYSTEMS[0],
              "second": HOSTILE_SYSTEMS[1], "preference": -1, "annotator": "=cmd()"}]
    return rows



def write_tiny_bundle(path, rng):
    """A 3-system, 40-item bundle with human and metric scores (S1 best, S2 and S3 close), for replays."""
    systems = ["S1", "S2", "S3"]
    quality = {"S1": 0.9, "S2": 0.0, "S3": -0.2}
    rows = [{"kind": "study", "name": "tiny", "criterion": "quality"}]
    items = [f"doc-{k}" for k in range(40)]
    rows += [{"kind": "item", "id": item, "input": f"text {item}"} for item in items]
    rows += [{"kind": "output", "item": item, "system": s, "text": f"{s} on {item}"} for item in items for s in systems]
    for item in items:
        for s in systems:
            score = quality[s] + rng.normal()
            rows.append({"kind": "human_score", "item": item, "system": s, "score": round(score, 3), "annotator": "e1"})
            rows.append({"kind": "metric_score", "item": item, "system": s, "metric": "m1",
                         "score": round(score + rng.normal(), 3)})
    write_bundle_rows(rows, path)


CHAT_ANSWER = """Two steps:

1. Parse the input
2. **Validate** it

| metric | value |
|-------:|-------|
| BLEU   | 31.2  |

```python
def best(xs):
    return max(xs) if xs else None
```

See [the docs](https://docs.python.org/3/)."""


def chat_rows(n_items=3, answers=("A", "B"), *, texts=None, roles=None, **settings):
    """A markdown chat study: each item a system+user conversation, each output one assistant
    turn (``texts``: the outputs' contents, else CHAT_ANSWER and a short answer)."""
    texts = texts or {answers[0]: CHAT_ANSWER, answers[1]: "Just `max(xs)`."}
    rows = [{"kind": "study", "name": "Chat study", "text_format": "markdown", "batch_size": 1,
             "criterion": "helpfulness", **settings}]
    for n in range(n_items):
        rows.append({"kind": "item", "id": f"chat-{n}", "input": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"Question {n}: how do I find the *largest* number?"}]})
        rows += [{"kind": "output", "item": f"chat-{n}", "system": s,
                  "text": [{"role": "assistant", "content": texts[s]}]} for s in answers]
    return rows


RUBRIC = [
    {"name": "helpfulness", "label": "Which answer helps more?", "strength": True, "reason": "optional",
     "metric": "judge_help"},
    {"name": "correctness", "label": "Which answer is more correct?", "reason": "required"},
    {"name": "style", "label": "Which answer reads better?"},
]


def rubric_rows(items=40, *, imported=2, budget=150, batch=5):
    """A three-criterion rubric study of systems A, B, C: a judge metric for helpfulness, and
    ``imported`` items of pair A/B judged on every criterion by annotator e1."""
    rows = [{"kind": "study", "name": "Rubric study", "criteria": [dict(c) for c in RUBRIC], "batch_size": batch, "budget": budget,
             "text_format": "markdown"}]
    rows += [{"kind": "item", "id": f"r{n:02d}", "input": f"Question {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"r{n:02d}", "system": s, "text": f"**{s}** answers {n}"}
             for n in range(items) for s in "ABC"]
    rows += [{"kind": "metric_preference", "item": f"r{n:02d}", "first": a, "second": b, "metric": "judge_help",
              "preference": 1, "judge": "gpt-x", "order": "AB"} for n in range(items) for a, b in ("AB", "AC", "BC")]
    for n in range(imported):
        rows += [
            {"kind": "human_preference", "item": f"r{n:02d}", "first": "B", "second": "A", "preference": -1,
             "annotator": "e1", "criterion": "helpfulness", "strength": 2, "reason": "A is complete"},
            {"kind": "human_preference", "item": f"r{n:02d}", "first": "B", "second": "A", "preference": 1,
             "annotator": "e1", "criterion": "correctness", "reason": "A has a bug"},
            {"kind": "human_preference", "item": f"r{n:02d}", "first": "B", "second": "A", "preference": 0,
             "annotator": "e1", "criterion": "style"},
        ]
    return rows


# ---- people --------------------------------------------------------------------------------

def worker(name: str) -> Annotator:
    return Annotator.objects.create(platform=Annotator.Platform.PROLIFIC, external_id=name)


def researcher_client(client, study, role="researcher"):
    user = User.objects.create_user(f"{role}-{study.slug}", password="pw-12345678")
    study_membership_set(study=study, user=user, role=role)
    client.force_login(user)
    return client


def browser_login(page, live_server, study, username="res2"):
    """Log a new researcher of ``study`` in through the login form; lands on the dashboard."""
    user = User.objects.create_user(username, password="res-pass-123")
    study_membership_set(study=study, user=user, role="researcher")
    page.goto(f"{live_server.url}/accounts/login/?next=/s/{study.slug}/dashboard/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "res-pass-123")
    page.click("button[type=submit]")


def record_progress(page, bar: str) -> None:
    """Record ``bar``'s (value, max) in ``window.__progress`` now and after every htmx settle."""
    page.evaluate("""(bar) => {
      window.__progress = [];
      const note = () => { const shown = document.querySelector(bar);
        if (shown) window.__progress.push([Number(shown.value), Number(shown.max)]); };
      note();
      document.body.addEventListener('htmx:afterSettle', note);
    }""", bar)


def fits_the_viewport(page, width: int) -> bool:
    """No sideways scrolling at the requested width (a phone would widen its layout viewport)."""
    return page.evaluate("() => document.documentElement.scrollWidth") <= width


def assert_no_horizontal_scroll(page):
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.tagName + '.' + e.className)""")
    assert not wide, f"the page scrolls sideways: {wide[:5]}"


def researcher_upload_page(browser, live_server, size: tuple[int, int], username: str = "rita"):
    """A browser context of ``size`` on the upload page, a new researcher ``username`` logged in:
    (context, page); the caller closes the context."""
    user = User.objects.create_user(username, email=f"{username}@example.org", password=f"{username}-pass-123")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"{username}-pass-123")
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/studies/upload/")
    return context, page


# ---- the files researchers have (issue 37: protocol/tables.py) ---------------------------------

STUDY_FILE_MODELS = ("gpt-4o", "llama-3-70b", "mistral-large")


def study_files(kind: str, folder: Path, prompts: int = 8) -> list[Path]:
    """Files of one ``kind`` as researchers have them, written into ``folder``: ``csv`` (prompt,
    model, response, judge_score), ``alpacaeval`` (two model_outputs files), ``mtbench`` (questions
    and two answer files, two turns), ``parquet`` (the CSV's rows; as a Hugging Face dataset's
    Parquet export), ``dataset`` (the CSV's rows saved with ``save_to_disk``: the folder's files),
    ``references`` (a TSV of source, system, hypothesis, reference)."""
    import csv as csv_module

    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"prompt": f"How do I reverse a list in Python? (variant {p})", "model": m,
             "response": f"## Answer\n\nUse `reversed()` or `xs[::-1]` — {m}, {p}.",
             "judge_score": round(0.5 + 0.1 * k + 0.01 * p, 2)}
            for p in range(prompts) for k, m in enumerate(STUDY_FILE_MODELS)]
    if kind == "csv":
        path = folder / "answers.csv"
        with open(path, "w", newline="") as handle:
            writer = csv_module.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return [path]
    if kind == "parquet":
        import pyarrow
        import pyarrow.parquet as pq

        path = folder / "answers.parquet"
        pq.write_table(pyarrow.Table.from_pylist(rows), path)
        return [path]
    if kind == "dataset":
        import datasets

        saved = folder / "answers_dataset"
        datasets.Dataset.from_list(rows).save_to_disk(str(saved))
        return sorted(saved.iterdir())
    if kind == "alpacaeval":
        paths = []
        for model in STUDY_FILE_MODELS[:2]:
            path = folder / f"{model}_outputs.json"
            path.write_text(json.dumps([{"instruction": f"Write a haiku about {t}", "output": f"{t} haiku by {model}",
                                         "generator": model, "dataset": "helpful_base"}
                                        for t in ("rain", "snow", "sun", "wind")[:max(2, prompts // 2)]]))
            paths.append(path)
        return paths
    if kind == "mtbench":
        questions = folder / "question.jsonl"
        questions.write_text("".join(json.dumps({"question_id": q, "category": "coding",
                                                 "turns": [f"Write code {q}", f"Now test it {q}"]}) + "\n"
                                     for q in range(81, 81 + prompts)))
        paths = [questions]
        for model in STUDY_FILE_MODELS[:2]:
            path = folder / f"{model}.jsonl"
            path.write_text("".join(json.dumps({"question_id": q, "answer_id": f"{model}-{q}", "model_id": model,
                                                "tstamp": 0, "choices": [{"index": 0, "turns": [
                                                    f"```python\nprint({q})\n```", f"assert {q}"]}]}) + "\n"
                                    for q in range(81, 81 + prompts)))
            paths.append(path)
        return paths
    if kind == "references":
        path = folder / "wmt.tsv"
        with open(path, "w", newline="") as handle:
            writer = csv_module.writer(handle, delimiter="\t")
            writer.writerow(["source", "system", "hypothesis", "reference"])
            for p in range(prompts):
                for k, model in enumerate(STUDY_FILE_MODELS):
                    writer.writerow([f"Der Satz {p}.", model, f"The sentence {p}{'.' if k else ''}", f"The sentence {p}."])
        return [path]
    raise ValueError(f"unknown kind {kind!r}")


def worker_page(browser, live_server, slug: str, size: tuple[int, int], pid: str = "w1"):
    """A fresh browser context of ``size`` on a Prolific worker's start link of ``slug``:
    (context, page); the caller closes the context."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.goto(f"{live_server.url}/s/{slug}/start/?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=t")
    return context, page


def answer_rubric_hits(study: Study, workers: list, at_most: int, answer, key: str = "k",
                       read_seconds: float | None = None) -> int:
    """Serve and answer up to ``at_most`` HITs of a rubric study through the services, the workers
    taking turns; ``answer(assignment)`` gives the screen answers (criterion -> {value, reason}).
    Returns the HITs answered."""
    answered = 0
    for n in range(at_most):
        annotator = workers[n % len(workers)]
        assignment = hits.hit_next_for_annotator(study=study, annotator=annotator)
        if assignment is None:
            continue
        hits.judgement_submit(assignment=assignment, annotator=annotator, shown_value=0,
                              answers=answer(assignment), idempotency_key=f"{key}{n}", read_seconds=read_seconds)
        answered += 1
    return answered


# ---- clients of the cockpit, the admin and the API (researchers, staff)

def api_for(username, researcher=False):
    user = User.objects.create_user(username, password="pw-12345678")
    if researcher:
        user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    client = APIClient()
    client.force_authenticate(user)
    return client, user


def api_upload(client, rows, **extra):
    f = io.BytesIO(gzip.compress(bundle_bytes(rows)))
    f.name = "bundle.jsonl.gz"
    return client.post("/api/studies/", {"bundle": f, **extra}, format="multipart")


def group_researcher_client(username="rita"):
    user = User.objects.create_user(username, email=f"{username}@example.org", password=f"pw-{username}-123")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHER_GROUP)[0])
    client = Client()
    client.force_login(user)
    return user, client


def admin_client():
    admin = User.objects.create_user("boss", password="pw-boss-123", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin)
    return client


def admin_form_data(client, study):
    """The admin change form's current values as POST data (inlines included)."""
    page = client.get(f"/admin/annotation/study/{study.pk}/change/")
    forms = [page.context["adminform"].form]
    data = {}
    for formset in page.context["inline_admin_formsets"]:
        management = formset.formset.management_form
        for name in management.fields:
            data[f"{management.prefix}-{name}"] = management[name].value()
        forms += formset.formset.forms
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is not None and value is not False:
                data[form.add_prefix(name)] = value
    return page, data


def planner_form_data(**changes):
    data = {"budgets": "all", "batches": "5", "gammas": "0.05", "throughput": "30", "policy": "paper", "reps": "1",
            "metric_error": "0.3", "metric_error_low": "0.2", "metric_error_high": "0.4",
            "tie_rate": "0.2", "tie_rate_low": "0.1", "tie_rate_high": "0.3",
            "spread": "0.8", "spread_low": "0.5", "spread_high": "1.2"}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


# ---- the serving loop over HTTP ------------------------------------------------------------

def start_worker(client, slug, pid):
    response = client.get(f"/s/{slug}/start/?PROLIFIC_PID={pid}&STUDY_ID=x&SESSION_ID=y")
    assert response.status_code == 302 and response["Location"] == f"/s/{slug}/annotate/"


def current_hit(client, slug):
    """The annotate page's HIT; on the "ready" screen, press its button first (htmx does on load)."""
    response = client.get(f"/s/{slug}/annotate/")
    assert response.status_code == 200
    if response.context.get("screen") == "ready":
        assert client.post(f"/s/{slug}/next/").status_code in (200, 302)
        response = client.get(f"/s/{slug}/annotate/")
    context = response.context
    return context.get("assignment"), context


def served_hits(client, slug, at_most):
    """The worker's HITs one after another, as ``current_hit`` gives them (the caller answers
    each), until none is left or ``at_most`` were served."""
    for _ in range(at_most):
        assignment, context = current_hit(client, slug)
        if assignment is None:
            return
        yield assignment, context


def answer_truthfully(client, slug, at_most) -> None:
    """Answer the worker's HITs as ``truthful_answer`` does, one after another (``served_hits``)."""
    for assignment, context in served_hits(client, slug, at_most):
        client.post(f"/s/{slug}/hits/{assignment.pk}/",
                    {"answer": truthful_answer(context["left"], context["right"]), "key": context["key"]})


def truthful_answer(page_left: str, page_right: str) -> str:
    """The answer QUALITY gives for the two texts a crowd_rows HIT shows."""
    left, right = page_left.split()[0], page_right.split()[0]
    diff = QUALITY[left] - QUALITY[right]
    return "tie" if abs(diff) < 0.5 else ("left" if diff > 0 else "right")


def expire(assignment) -> None:
    """Move a lease's expiry into the past (its assignment and its comparison's copy)."""
    past = timezone.now() - timedelta(seconds=1)
    Assignment.objects.filter(pk=assignment.pk).update(expires_at=past)
    Comparison.objects.filter(pk=assignment.comparison_id).update(lease_expires_at=past)


def judged_crowd_study(client, budget=60):
    """The crowd study of test_serving after truthful annotators spent its budget (A > B ~ C)."""
    rows = crowd_rows(batch=5, budget=budget)
    rows[0].update(allocation_policy="paper", protocol_rule="bayes")  # every pair takes rounds of 5
    study = study_import(source=bundle_bytes(rows))
    worker = client.__class__()
    start_worker(worker, study.slug, "pid-judged")
    answer_truthfully(worker, study.slug, budget)
    return study


# ---- the serving loop through the services, many at once ------------------------------------

CONCURRENT_THREADS = 20
CONCURRENT_MAX_SECONDS = 60


def annotate_concurrently(study: Study, *, threads: int = CONCURRENT_THREADS, double_submit: bool = False) -> dict:
    """``threads`` annotators lease and submit until there is no work; returns what happened."""
    annotators = [Annotator.objects.create(platform=Annotator.Platform.PROLIFIC, external_id=f"t{n}")
                  for n in range(threads)]
    acknowledged, errors, refused = [], [], []
    guard = threading.Lock()
    deadline = time.monotonic() + CONCURRENT_MAX_SECONDS
    start = threading.Barrier(threads)

    def run(annotator: Annotator, seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait()
            idle = 0
            while time.monotonic() < deadline and idle < 20:
                hit = hits.hit_next_for_annotator(study=Study.objects.get(pk=study.pk), annotator=annotator)
                if hit is None:
                    idle += 1  # rounds may be closing in the background: look again shortly
                    time.sleep(0.05)
                    continue
                idle = 0
                key = hits.new_idempotency_key()
                answer = rng.choice([1, 1, 0, -1])
                attempts = 2 if double_submit else 1
                for _ in range(attempts):
                    try:
                        hits.judgement_submit(assignment=hit, annotator=annotator, shown_value=answer,
                                              idempotency_key=key)
                        with guard:
                            acknowledged.append(key)
                    except hits.HitError as error:
                        with guard:
                            refused.append(str(error))
        except Exception as error:  # noqa: BLE001 — every failure is reported by the test
            with guard:
                errors.append(repr(error))
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(a, n)) for n, a in enumerate(annotators)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(CONCURRENT_MAX_SECONDS + 30)
    return {"acknowledged": acknowledged, "errors": errors, "refused": refused}


# ---- honest workers and a spammer (quality control) ----------------------------------------

#: C and D are even: every honest answer on that pair is a tie
SPAM_QUALITY = {"A": 3.0, "B": 2.0, "C": 1.0, "D": 1.2}
HONEST = [f"honest{n}" for n in range(5)]


def spam_bundle(slug: str, items: int = 20) -> bytes:
    # The paper's rule: its decision is a function of the counted judgements alone, so a run
    # re-decided after an exclusion equals the run without the excluded worker. (An e-process's
    # wealth depends on when each judgement came; tests/quality/test_weighted_null.py drives
    # exclusion and re-inclusion under it.)
    rows = [{"kind": "study", "name": slug, "batch_size": 10, "budget": 200, "allocation_policy": "paper",
             "protocol_rule": "bayes"}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in SPAM_QUALITY]
    return bundle_bytes(rows)


def spam_truth(first: str, second: str) -> int:
    diff = SPAM_QUALITY[first] - SPAM_QUALITY[second]
    return 0 if abs(diff) < 0.5 else (1 if diff > 0 else -1)


def annotate_with_spammer(study: Study, workers: dict[str, Annotator], rng: random.Random, spammer: str | None) -> int:
    """Serve the workers in turn until none gets a HIT; returns the judgements made.

    Honest workers answer the truth after 15 s; the spammer answers at random after 0.2 s
    (the lease's issue time is set back by that much: the server measures time on task), and
    so gets through three HITs in an honest worker's one.
    """
    made = 0
    turns = [name for name in workers for _ in range(3 if name == spammer else 1)]
    while True:
        progressed = False
        for name in turns:
            annotator = workers[name]
            study.refresh_from_db()
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            spam = name == spammer
            seconds = 0.2 if spam else 15.0
            Assignment.objects.filter(pk=hit.pk).update(issued_at=timezone.now() - timedelta(seconds=seconds))
            hit.refresh_from_db()
            comparison = hit.comparison
            value = rng.choice([-1, 0, 1]) if spam else spam_truth(comparison.first.name, comparison.second.name)
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=-value if hit.shown_swapped else value, seconds_on_task=seconds)
            made += 1
            progressed = True
        if not progressed:
            return made


def workers_of(names) -> dict[str, Annotator]:
    return {n: hits.annotator_for_worker(platform="prolific", worker_id=n) for n in names}


#: the texts of the checks in checked_rows: GOOD beats BAD
GOOD, BAD = "A clear, correct and complete answer.", "answer answer answer the the"


#: the ranking studies' systems: s5 > s4 > ... > s0 (the higher number wins every item)
RANKING_SYSTEMS = [f"s{n}" for n in range(6)]
RANKING_SETTINGS = {"pair_design": "ranking", "family_control": "none"}


def ranking_rows(items=30, *, metric=False, **settings):
    """A ranking-design study of RANKING_SYSTEMS (docs/ranking.md); ``metric``: a judge whose
    mean score orders the systems as the truth does."""
    rows = [{"kind": "study", "name": "Leaderboard", "batch_size": 10, "budget": 5000, **RANKING_SETTINGS,
             **settings}]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Prompt {n}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
             for n in range(items) for s in RANKING_SYSTEMS]
    if metric:
        rows[0]["metric"] = "judge"
        rows += [{"kind": "metric_score", "item": f"i{n:02d}", "system": s, "metric": "judge",
                  "score": float(j) + 0.01 * n} for n in range(items) for j, s in enumerate(RANKING_SYSTEMS)]
    return rows


def ranking_truth(first: str, second: str) -> int:
    """+1 when ``first`` is the better of two RANKING_SYSTEMS."""
    return (int(first[1:]) > int(second[1:])) - (int(first[1:]) < int(second[1:]))


def answer_hits(study: Study, workers: dict, answer, *, stop_after: int | None = None) -> int:
    """Serve the workers in turn through the services until none gets a HIT (or ``stop_after``
    judgements); ``answer(first, second, worker)`` is the canonical label. Returns the
    judgements made."""
    made = 0
    while stop_after is None or made < stop_after:
        progressed = False
        for name, annotator in workers.items():
            study.refresh_from_db()
            hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
            if hit is None:
                continue
            value = answer(hit.comparison.first.name, hit.comparison.second.name, name)
            hits.judgement_submit(assignment=hit, annotator=annotator, idempotency_key=hits.new_idempotency_key(),
                                  shown_value=-value if hit.shown_swapped else value)
            made += 1
            progressed = True
        if not progressed:
            break
    return made


def answer_null_with_an_exclusion(study: Study, *, exclude_after: int) -> None:
    """A null study answered by three workers: each pair's judgements alternate +1 / -1 in the
    order they are served (evidence that never accumulates, whatever items the app draws); the
    third worker is excluded after ``exclude_after`` judgements (the re-decision rebuilds the
    pairs from the others' judgements, which then need not alternate), the other two answer
    until nothing is served. The study is refreshed at the end."""
    workers = workers_of(["n1", "n2", "n3"])
    served: dict[tuple[str, str], int] = {}

    def alternate(first, second, name):
        served[(first, second)] = served.get((first, second), 0) + 1
        return 1 if served[(first, second)] % 2 else -1

    answer_hits(study, workers, alternate, stop_after=exclude_after)
    quality.annotator_exclude(study=study, annotator=workers["n3"], reason="test")
    answer_hits(study, {k: v for k, v in workers.items() if k != "n3"}, alternate)
    study.refresh_from_db()


def checked_rows(items=12, **settings):
    out = [{"kind": "study", "name": "Checked", "batch_size": 5, "budget": 60, "completion_code": "OK1", **settings}]
    out += [{"kind": "item", "id": f"i{n:02d}", "input": f"Input {n}"} for n in range(items)]
    out += [{"kind": "output", "item": f"i{n:02d}", "system": s, "text": f"{s} answer {n}"}
            for n in range(items) for s in ("A", "B", "C")]
    out += [{"kind": "check", "id": f"gold-{n}", "input": f"Check input {n}", "first": GOOD, "second": BAD,
             "expected": "first"} for n in range(3)]
    out += [{"kind": "check", "id": "same", "input": "Two identical texts", "first": GOOD, "second": GOOD,
             "expected": "tie"}]
    return out


# ---- rate limits ---------------------------------------------------------------------------

def rates(settings, **overrides):
    settings.EVALAPP_THROTTLE_RATES = {**settings.EVALAPP_THROTTLE_RATES, **overrides}


def assert_throttled(response):
    assert response.status_code == 429, response.content[:200]
    assert 1 <= int(response["Retry-After"]) <= 60


# ---- outside services ----------------------------------------------------------------------

def redis_answers() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(REDIS) == 0


def database_url() -> str:
    """The test database as a URL, for a worker process started by a test."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def clear_throttle_counts() -> None:
    """Forget throttle counts: a store of this run's own (memory, a test's directory) is
    cleared; on Redis only this run's prefixed keys go."""
    for alias in ("default", "throttle"):
        cache = caches[alias]
        if "redis" not in settings.CACHES[alias]["BACKEND"].lower():
            cache.clear()
            continue
        client = cache._cache.get_client(None, write=True)
        prefix = settings.CACHES[alias]["KEY_PREFIX"]
        try:
            for key in client.scan_iter(match=f"{prefix}:*"):
                client.delete(key)
        except RedisConnectionError:  # a Redis a test made unreachable holds nothing of the run
            pass


# ---- rendering: hostile texts and how to tell they stay inert -----------------------------

PAYLOADS = [
    "<script>window.__xss=1</script>",
    '<img src=x onerror="window.__xss=2">',
    "[click](javascript:window.__xss=3)",
    "[click](JaVaScRiPt:window.__xss=4)",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<a href=\"javascript:window.__xss=5\">x</a>",
    "```html\n<script>window.__xss=6</script>\n```",
    "```<script>x</script>\ncode\n```",
    "![pic](https://example.org/x.png)",
    "<svg onload=window.__xss=7>",
    "[x](https://example.org \"title\\\" onmouseover=\\\"window.__xss=8\")",
    "<details open ontoggle=window.__xss=9>",
]

class _Elements(HTMLParser):
    """Every element of an HTML fragment as (tag, {attribute: value}), as a browser parses it."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.found = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))

def assert_inert(html: str) -> None:
    """No element that runs or fetches, no event handler, no link but http(s) and mailto."""
    for tag, attributes in _Elements(html).found:
        assert tag not in {"script", "img", "svg", "iframe", "object", "embed", "style", "details"}, html
        assert not [a for a in attributes if a.lower().startswith("on")], (tag, attributes)
        href = (attributes.get("href") or "").strip().lower()
        assert not href or href.startswith(("http://", "https://", "mailto:")), (tag, attributes)


# ---- a chat bundle (conversations, judge verdicts in one order) --------------------------

CHAT_ROWS = [
    {"kind": "study", "name": "chat", "text_format": "markdown"},
    {"kind": "item", "id": "c1", "input": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "List *two* primes."}]},
    {"kind": "output", "item": "c1", "system": "A", "text": [{"role": "assistant", "content": "- 2\n- 3"}]},
    {"kind": "output", "item": "c1", "system": "B", "text": [{"role": "assistant", "content": "2, 3"},
                                                              {"role": "user", "content": "more"},
                                                              {"role": "assistant", "content": "5"}]},
    {"kind": "metric_preference", "item": "c1", "first": "A", "second": "B", "metric": "gpt35",
     "preference": 1, "judge": "gpt-3.5-turbo", "prompt": "pandalm-v1", "order": "AB"},
    {"kind": "metric_preference", "item": "c1", "first": "B", "second": "A", "metric": "gpt35",
     "preference": 1, "judge": "gpt-3.5-turbo", "prompt": "pandalm-v1", "order": "AB"},
]


def first_rounds_filled_unclosed(prefix: str) -> Study:
    """A 3-pair study (20 items, batch 4) whose every pair's first round is filled and left for
    the test to close: the close that the submits ask for is switched off while they run."""
    study = study_import(source=bundle_bytes(crowd_rows(items=20, batch=4, budget=60)))
    annotators = [Annotator.objects.create(platform="prolific", external_id=f"{prefix}{n}") for n in range(4)]
    original, jobs.rounds_close = jobs.rounds_close, lambda study_id: None
    try:
        for _ in range(12):
            for annotator in annotators:
                hit = hits.hit_next_for_annotator(study=study, annotator=annotator)
                if hit is not None:
                    hits.judgement_submit(assignment=hit, annotator=annotator, shown_value=1,
                                          idempotency_key=hits.new_idempotency_key())
    finally:
        jobs.rounds_close = original
    assert PairState.objects.filter(study=study, status="filled").count() == 3
    return study


# ---- LLM judges (tests/judges) ---------------------------------------------------------------

JUDGE_SYSTEMS = ("A", "B", "C")


def judge_quality(item: int, system: str, seed: int = 11) -> int:
    """The true quality (1-5) of a system's answer to an item of ``judge_rows``' study."""
    return random.Random(f"{seed}:{item}:{system}").randint(1, 5)


def judge_rows(items: int = 20, *, humans: int = 0, token: str = "", criteria=None, **settings) -> list[dict]:
    """A study of 3 systems whose answers carry their quality in their text ("(quality N)", the
    fake judge reads it, tests/fake_openai.py) and ``humans`` truthful imported human judgements
    per pair (the first items; in a rubric every criterion answered alike). ``token`` makes the
    texts unique (the judge cache is keyed by text)."""
    study = {"kind": "study", "name": f"Judged {token}", "criterion": "helpfulness", "batch_size": 5,
             "budget": 40, **settings}
    if criteria:
        study["criteria"] = criteria
    rows = [study]
    rows += [{"kind": "item", "id": f"i{n:02d}", "input": f"Question {n} {token}"} for n in range(items)]
    rows += [{"kind": "output", "item": f"i{n:02d}", "system": s,
              "text": f"{s} answers {n} {token} (quality {judge_quality(n, s)})"}
             for n in range(items) for s in JUDGE_SYSTEMS]
    for a, b in itertools.combinations(JUDGE_SYSTEMS, 2):
        for n in range(humans):
            qa, qb = judge_quality(n, a), judge_quality(n, b)
            value = (qa > qb) - (qa < qb)
            row = {"kind": "human_preference", "item": f"i{n:02d}", "first": a, "second": b, "annotator": "h1"}
            if criteria:
                rows += [{**row, "criterion": c["name"], "preference": value} for c in criteria]
            else:
                rows.append({**row, "preference": value})
    return rows


# ---- the style-controlled leaderboard (protocol/style_control.py) --------------------------

#: true log-strength of the style study's systems and the true effect of 100 more words
STYLE_QUALITY = {"A": 0.3, "B": 0.0, "C": -0.3}
STYLE_WORDS_EFFECT = 1.0


def style_rows(items=80, judgements=6, seed=3, judged_items=None, **settings):
    """A 3-system study whose answers differ in length (20 to 220 words) and markdown, with
    ``judgements`` imported human judgements per item and pair (on the first ``judged_items``
    items, default all) drawn from Bradley–Terry with
    STYLE_QUALITY and a word effect of STYLE_WORDS_EFFECT log-odds per 100 words; C writes the
    longest answers, A the shortest, so that the plain leaderboard credits C with its length."""
    rng = random.Random(seed)
    rows = [{"kind": "study", "name": "Style study", "batch_size": 5, "budget": 300, "text_format": "markdown",
             **settings}]
    rows += [{"kind": "item", "id": f"q{n:03d}", "input": f"Question {n}"} for n in range(items)]
    length = {"A": 60, "B": 110, "C": 160}
    words = {}
    for n in range(items):
        for s in STYLE_QUALITY:
            count = max(20, min(220, int(rng.gauss(length[s], 40))))
            words[(n, s)] = count
            body = " ".join(["word"] * count)
            if rng.random() < 0.5:
                body = f"## Answer\n\n{body}"
            if rng.random() < 0.5:
                body = f"{body}\n\n- point one\n- point two"
            if rng.random() < 0.5:
                body = f"**{s}** {body}"
            rows.append({"kind": "output", "item": f"q{n:03d}", "system": s, "text": body})
    for n in range(items if judged_items is None else judged_items):
        for a, b in (("A", "B"), ("A", "C"), ("B", "C")):
            logit = STYLE_QUALITY[a] - STYLE_QUALITY[b] + STYLE_WORDS_EFFECT * (words[(n, a)] - words[(n, b)]) / 100
            for k in range(judgements):
                value = 1 if rng.random() < 1 / (1 + pow(2.718281828459045, -logit)) else -1
                rows.append({"kind": "human_preference", "item": f"q{n:03d}", "first": a, "second": b,
                             "preference": value, "annotator": f"e{k}"})
    return rows
