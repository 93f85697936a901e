from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("studies/upload/", views.study_upload, name="study_upload"),
]
