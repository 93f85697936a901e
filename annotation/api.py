"""The REST API (DRF): thin views over the same services and selectors as the pages."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from rest_framework import status
from rest_framework.exceptions import PermissionDenied as ApiPermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from protocol.bundle import BundleError

from . import selectors, serializers, serving, services
from .access import access_study_as_researcher, access_study_creation
from .models import Assignment, Study, StudyMembership

ANSWERS = {"left": 1, "tie": 0, "right": -1}


class StudyListApi(APIView):
    def get(self, request):
        studies = Study.objects.all() if request.user.is_staff else Study.objects.filter(
            memberships__user=request.user, memberships__role=StudyMembership.Role.RESEARCHER)
        return Response(serializers.StudySerializer(studies.order_by("name"), many=True).data)

    def post(self, request):
        access_study_creation(request.user)
        form = serializers.StudyImportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            study = services.study_import(source=form.validated_data["bundle"].file,
                                          slug=form.validated_data.get("slug") or None,
                                          metric=form.validated_data.get("metric") or None,
                                          created_by=request.user)
        except BundleError as exc:
            return Response({"detail": "invalid study bundle", "problem_count": exc.total,
                             "problems": [{"line": p.line, "message": p.message} for p in exc.problems]},
                            status=status.HTTP_400_BAD_REQUEST)
        return Response(serializers.StudySerializer(study).data, status=status.HTTP_201_CREATED)


class StudyDetailApi(APIView):
    def get(self, request, slug):
        study = get_object_or_404(Study, slug=slug)
        access_study_as_researcher(request.user, study)
        serving.study_protocol_ensure_started(study=study)
        data = selectors.study_dashboard_data(study=study)
        return Response({**serializers.StudySerializer(study).data, "budget": data["budget"],
                         "statuses": data["statuses"], "favi_summary": data["favi_summary"], "spa": data["spa"],
                         "leaderboard": data["leaderboard"],
                         "pairs": serializers.PairSerializer(data["pairs"], many=True).data})


class HitNextApi(APIView):
    """POST: lease the next HIT of the study for the calling user (204 when there is none)."""

    def post(self, request, slug):
        study = get_object_or_404(Study, slug=slug)
        if not (request.user.is_staff or study.memberships.filter(user=request.user).exists()):
            raise ApiPermissionDenied("You are not a member of this study.")
        annotator = serving.annotator_for_user(user=request.user)
        hit = serving.hit_next_for_annotator(study=study, annotator=annotator)
        if hit is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(serializers.HitSerializer(selectors.hit_display(assignment=hit)).data)


class HitSubmitApi(APIView):
    """POST with an ``Idempotency-Key`` header: answer a HIT; repeating the key is harmless."""

    def post(self, request, hit_id):
        assignment = get_object_or_404(Assignment.objects.select_related(
            "comparison__first", "comparison__second", "comparison__item"), pk=hit_id)
        form = serializers.SubmitSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        key = request.headers.get("Idempotency-Key", "")
        try:
            judgement = serving.judgement_submit(
                assignment=assignment, annotator=serving.annotator_for_user(user=request.user),
                shown_value=ANSWERS[form.validated_data["answer"]], idempotency_key=key,
                seconds_on_task=form.validated_data.get("seconds_on_task"))
        except serving.HitError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response({"judgement": judgement.pk, "value": judgement.value}, status=status.HTTP_200_OK)
