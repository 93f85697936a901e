from django.urls import path

from . import views, views_annotate, views_judges, views_members, views_planner, views_research
from . import views_items
from .throttles import throttle_page
from .framing import crowd_frameable

urlpatterns = [
    path("", views.home, name="home"),
    path("account/api-token/", views.api_token, name="api_token"),
    path("studies/upload/", views.study_upload, name="study_upload"),
    path("s/<slug:slug>/start/", throttle_page("crowd_start")(crowd_frameable(views_annotate.study_start)),
         name="study_start"),
    path("s/<slug:slug>/annotate/", throttle_page("page", methods=("GET",))(views_annotate.annotate), name="annotate"),
    path("s/<slug:slug>/next/", throttle_page("submit", methods=("POST",))(views_annotate.hit_next),
         name="hit_next"),
    path("s/<slug:slug>/hits/<int:assignment_id>/", throttle_page("submit", methods=("POST",))(
        views_annotate.hit_submit), name="hit_submit"),
    path("s/<slug:slug>/hits/<int:assignment_id>/diff/", views_annotate.hit_diff, name="hit_diff"),
    path("s/<slug:slug>/hits/<int:assignment_id>/skip/", throttle_page("submit", methods=("POST",))(
        views_annotate.hit_skip), name="hit_skip"),
    path("s/<slug:slug>/hits/<int:assignment_id>/flag/", throttle_page("submit", methods=("POST",))(
        views_annotate.hit_flag), name="hit_flag"),
    # The page that showed a HIT is gone (a beacon on pagehide) / shows it again (a reload).
    path("s/<slug:slug>/hits/<int:assignment_id>/release/", throttle_page("submit", methods=("POST",))(
        views_annotate.hit_release), name="hit_release"),
    path("s/<slug:slug>/hits/<int:assignment_id>/keep/", throttle_page("submit", methods=("POST",))(
        views_annotate.hit_keep), name="hit_keep"),
    path("s/<slug:slug>/dashboard/", views_research.dashboard, name="dashboard"),
    # System names may hold any character (a "/" too): the pair is named in the query string.
    path("s/<slug:slug>/pair/", views_research.pair_detail, name="pair_detail"),
    # Item ids may hold any character (a "/", a "..", a space): the item is named in the query string.
    path("s/<slug:slug>/item/", views_items.item_reader, name="item_reader"),
    path("s/<slug:slug>/items/", views_items.item_search, name="item_search"),
    path("s/<slug:slug>/metrics/", views_research.metrics_table, name="metrics_table"),
    path("s/<slug:slug>/plan/", views_planner.planner, name="planner"),
    path("s/<slug:slug>/plan/<int:job_id>/", views_planner.plan_job, name="plan_job"),
    path("s/<slug:slug>/judges/", views_judges.judges, name="judges"),
    path("s/<slug:slug>/judges/<int:run_id>/", views_judges.judge_run, name="judge_run"),
    path("help/", views_research.help_page, name="help"),
    path("s/<slug:slug>/settings/", views_research.study_settings, name="study_settings"),
    path("s/<slug:slug>/members/", views_members.study_members, name="study_members"),
    path("s/<slug:slug>/export/judgements.csv", views_research.judgements_csv, name="judgements_csv"),
    path("s/<slug:slug>/export/decisions.csv", views_research.decisions_csv, name="decisions_csv"),
    path("s/<slug:slug>/export/style-leaderboard.csv", views_research.style_leaderboard_csv,
         name="style_leaderboard_csv"),
    path("s/<slug:slug>/export/quality.csv", views_research.quality_csv, name="quality_csv"),
    path("s/<slug:slug>/export/crowd.csv", views_research.crowd_csv, name="crowd_csv"),
    path("s/<slug:slug>/annotators/<int:annotator_id>/exclusion/", views_research.annotator_exclusion,
         name="annotator_exclusion"),
]
