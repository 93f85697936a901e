from django.urls import path

from . import views, views_annotate, views_research

urlpatterns = [
    path("", views.home, name="home"),
    path("studies/upload/", views.study_upload, name="study_upload"),
    path("s/<slug:slug>/start/", views_annotate.study_start, name="study_start"),
    path("s/<slug:slug>/annotate/", views_annotate.annotate, name="annotate"),
    path("s/<slug:slug>/hits/<int:assignment_id>/", views_annotate.hit_submit, name="hit_submit"),
    path("s/<slug:slug>/dashboard/", views_research.dashboard, name="dashboard"),
    path("s/<slug:slug>/pairs/<str:first>/<str:second>/", views_research.pair_detail, name="pair_detail"),
    path("s/<slug:slug>/metrics/", views_research.metrics_table, name="metrics_table"),
    path("help/", views_research.help_page, name="help"),
    path("s/<slug:slug>/settings/", views_research.study_settings, name="study_settings"),
    path("s/<slug:slug>/export/judgements.csv", views_research.judgements_csv, name="judgements_csv"),
    path("s/<slug:slug>/export/decisions.csv", views_research.decisions_csv, name="decisions_csv"),
]
