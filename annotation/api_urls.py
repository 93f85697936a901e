from django.urls import path

from . import api

urlpatterns = [
    path("studies/", api.StudyListApi.as_view(), name="api_studies"),
    path("studies/<slug:slug>/", api.StudyDetailApi.as_view(), name="api_study"),
    path("studies/<slug:slug>/hits/next/", api.HitNextApi.as_view(), name="api_hit_next"),
    path("hits/<int:hit_id>/submit/", api.HitSubmitApi.as_view(), name="api_hit_submit"),
]
