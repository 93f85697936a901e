"""manage.py demo_setup: import the shipped demo studies and create the demo accounts.

Idempotent: studies already present are left alone; demo passwords are reset.
"""
import os
import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from annotation.access import RESEARCHER_GROUP
from annotation.models import Study, StudyMembership
from annotation.reports import study_dashboard_refresh, study_metrics_table, study_metrics_table_refresh
from annotation.selectors.serving import study_work_left
from annotation.services.members import study_membership_set
from annotation.services.studies import demo_user_ensure, study_import, study_settings_update
from annotation.services.runtime import protocol_ensure_started
from protocol.arena import ArenaSpec, make_arena, write_bundle

BUNDLES = Path(settings.BASE_DIR) / "data" / "bundles"
# (bundle, slug, metric the protocol uses)
DEMO_STUDIES = [
    ("summeval_relevance.jsonl.gz", "summeval-relevance", "bert_score_f"),
    ("pandalm.jsonl.gz", "pandalm", "gpt35"),
    ("pandalm_chat.jsonl.gz", "pandalm-chat", "gpt35"),  # the same data as a one-turn chat, markdown
    # three criteria in one HIT, each its own protocol with its own GPT-3.5 judge (both orders)
    ("summeval_rubric.jsonl.gz", "summeval-rubric", None),
    ("separability_prefs.jsonl.gz", "separability-prefs", None),
]
# Crowd-session settings of a freshly imported demo study (docs/crowd.md): a Prolific or MTurk
# worker gets the code after 5 comparisons and may do up to 10, each on screen for >= 3 s.
DEMO_CROWD_SETTINGS = {
    "summeval-relevance": {"session_hits_min": 5, "session_hits_max": 10, "session_minutes": 0,
                           "min_seconds_per_hit": 3, "completion_code": "SUMMEVAL-DEMO"},
}
# A leaderboard study run by the ranking design (docs/ranking.md): a synthetic arena of 12
# systems on 200 prompts with a known order (mean neighbour gap 0.6) and a noisy judge,
# generated here (no human lines); each comparison takes at most 120 of its 200 judgements.
# The same arena run by the active design: rounds of 20 on the neighbours of the fitted order it
# is least sure of, until each is resolved to the study's resolution at its confidence (the
# protocol's defaults, 0.05 at 0.95).
RANKING_DEMOS = [
    ("arena-ranking", "Synthetic arena, ranked by a merge sort (12 systems x 200 prompts)",
     ArenaSpec(systems=12, prompts=200, seed=0, gap=0.6),
     {"pair_design": "ranking", "family_control": "none", "batch_size": 20, "budget": 20000,
      "ranking_max_labels": 120}),
    ("arena-active", "Synthetic arena, ranked actively (12 systems x 200 prompts)",
     ArenaSpec(systems=12, prompts=200, seed=0, gap=0.6),
     {"pair_design": "active", "family_control": "none", "batch_size": 20, "budget": 20000}),
]
ACCOUNTS = [
    # username, password, staff, role in every demo study
    ("admin", "admin-demo-pass", True, StudyMembership.Role.RESEARCHER),
    ("researcher", "researcher-demo-pass", False, StudyMembership.Role.RESEARCHER),
    ("annotator", "annotator-demo-pass", False, StudyMembership.Role.ANNOTATOR),
]


def demo_completion_code(slug: str) -> str:
    """The code a demo study's crowd workers get: the demo prints its links in Prolific's form,
    and a Prolific study without a code could not pay its workers (its dashboard says so)."""
    return f"{slug.upper()}-DEMO"


class Command(BaseCommand):
    help = ("Import the demo studies (SummEval relevance, PandaLM, PandaLM as a chat, SummEval as a rubric, "
            "separability preferences) "
            "and demo accounts.")

    def handle(self, *args, **options):
        studies = []
        for filename, slug, metric in DEMO_STUDIES:
            path = BUNDLES / filename
            if not path.exists():
                self.stderr.write(f"skipping {filename}: not in {BUNDLES}")
                continue
            study = Study.objects.filter(slug=slug).first()
            if study is None:
                self.stdout.write(f"importing {filename} ...")
                study = study_import(source=path, slug=slug, metric=metric)
                study_settings_update(study=study, changes=DEMO_CROWD_SETTINGS.get(slug, {
                    "completion_code": demo_completion_code(slug)}))
            protocol_ensure_started(study=study)
            studies.append(study)
        studies += [self._ranking_demo(*demo) for demo in RANKING_DEMOS]
        researchers, _ = Group.objects.get_or_create(name=RESEARCHER_GROUP)
        port = os.environ.get("PORT", "8000")
        self.stdout.write(f"\nDemo accounts (log in at http://127.0.0.1:{port}/accounts/login/):")
        for username, password, staff, role in ACCOUNTS:
            user = demo_user_ensure(username=username, password=password, is_staff=staff)
            if role == StudyMembership.Role.RESEARCHER:
                user.groups.add(researchers)
            for study in studies:
                study_membership_set(study=study, user=user, role=role)
            self.stdout.write(f"  {username:<11} password: {password}")
        # The metrics table and the dashboard are background jobs; computing them now spares the
        # first visitor the wait (a dashboard never computed says so and reloads itself).
        for study in studies:
            if study.metrics.exists() and study_metrics_table(study=study) is None:
                self.stdout.write(f"computing the metrics table of {study.slug} ...")
                study_metrics_table_refresh(study_id=study.pk)
            if study.protocol_started:
                self.stdout.write(f"computing the dashboard of {study.slug} ...")
                study_dashboard_refresh(study_id=study.pk)
        base = f"http://127.0.0.1:{port}"
        self.stdout.write("\nStudies (researchers: the dashboard; crowd workers: the start link, as Prolific sends it):")
        for study in studies:
            self.stdout.write(f"  {study.name}\n    {base}/s/{study.slug}/dashboard/")
            if study_work_left(study=study):
                self.stdout.write(f"    {base}/s/{study.slug}/start/?PROLIFIC_PID=demo-worker-1&STUDY_ID=demo"
                                  "&SESSION_ID=demo-session-1")
            else:
                # A start link here would only say "This study has finished": the dashboard is
                # what such a study demonstrates.
                study.refresh_from_db(fields=["protocol_imported_judgements"])
                self.stdout.write(f"    no crowd link: all {study.protocol_imported_judgements:,} of its human "
                                  "judgements came with the bundle, so no pair has work left")
        self.stdout.write(self.style.SUCCESS(f"\n{len(studies)} demo studies ready."))

    def _ranking_demo(self, slug: str, name: str, spec: ArenaSpec, study_settings: dict) -> Study:
        study = Study.objects.filter(slug=slug).first()
        if study is not None:
            return study
        self.stdout.write(f"generating and importing the synthetic arena {slug} ...")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "arena.jsonl.gz"
            write_bundle(make_arena(spec), path, human=False, study_settings={"name": name})
            return study_import(source=path, slug=slug, metric="judge_score",
                                study_settings={**study_settings, "completion_code": demo_completion_code(slug)})
