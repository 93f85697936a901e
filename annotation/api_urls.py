from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from . import api

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api_schema"), name="api_docs"),
    path("studies/", api.StudyListApi.as_view(), name="api_studies"),
    path("studies/<slug:slug>/", api.StudyDetailApi.as_view(), name="api_study"),
    path("studies/<slug:slug>/settings/", api.StudySettingsApi.as_view(), name="api_study_settings"),
    path("studies/<slug:slug>/pairs/", api.StudyPairsApi.as_view(), name="api_study_pairs"),
    path("studies/<slug:slug>/decisions/", api.StudyDecisionsApi.as_view(), name="api_study_decisions"),
    path("studies/<slug:slug>/leaderboard/", api.StudyLeaderboardApi.as_view(), name="api_study_leaderboard"),
    path("studies/<slug:slug>/leaderboard/style/", api.StudyStyleLeaderboardApi.as_view(),
         name="api_study_style_leaderboard"),
    path("studies/<slug:slug>/judgements/", api.StudyJudgementsApi.as_view(), name="api_study_judgements"),
    path("studies/<slug:slug>/report/", api.StudyReportApi.as_view(), name="api_study_report"),
    path("studies/<slug:slug>/export/", api.StudyExportApi.as_view(), name="api_study_export"),
    path("studies/<slug:slug>/judges/", api.StudyJudgesApi.as_view(), name="api_study_judges"),
    path("studies/<slug:slug>/annotators/", api.StudyAnnotatorsApi.as_view(), name="api_study_annotators"),
    path("studies/<slug:slug>/annotators/<int:annotator_id>/exclusion/", api.AnnotatorExclusionApi.as_view(),
         name="api_study_annotator_exclusion"),
    path("studies/<slug:slug>/members/", api.StudyMembersApi.as_view(), name="api_study_members"),
    path("studies/<slug:slug>/members/<str:username>/", api.StudyMemberApi.as_view(), name="api_study_member"),
    path("studies/<slug:slug>/hits/next/", api.HitNextApi.as_view(), name="api_hit_next"),
    path("hits/<int:hit_id>/submit/", api.HitSubmitApi.as_view(), name="api_hit_submit"),
    # Anything else under /api/ is a JSON 404 like every other API error (not Django's HTML page).
    re_path(r"^", api.api_not_found, name="api_not_found"),
]
