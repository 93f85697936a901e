"""The REST API (DRF): thin views over the same access checks, services and selectors as the pages.

Every error answers ``{"detail", "code"}`` (annotation/api_errors.py); a study the caller may
not know exists answers 404 (annotation/access.py). Described in OpenAPI at /api/schema/.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import ListAPIView
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from protocol import tables
from protocol.bundle import BundleError, BundleProblem
from protocol.preference_data import FORMATS as PREFERENCE_FORMATS

from . import reports, selectors, serializers, services
from .access import (
    access_api_worker,
    access_hit_of_user,
    access_study_as_researcher,
    access_study_creation,
    access_study_running,
    studies_for_researcher,
)
from .api_errors import (
    BundleErrorSerializer,
    BundleInvalid,
    Conflict,
    ErrorSerializer,
    IdempotencyKeyRequired,
    ValidationErrorSerializer,
)
from .errors import HitError, QualityError
from .models import Annotator, Assignment, Study
from .rubrics import SHOWN_ANSWERS
from .throttles import ApiTokenThrottle, SubmitThrottle

IDEMPOTENCY_KEY_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 64}

_ERRORS = {
    400: OpenApiResponse(ValidationErrorSerializer, description="invalid input (code invalid; `errors` names "
                                                                "each field), a body that is not JSON "
                                                                "(code parse_error), or a submit without an "
                                                                "Idempotency-Key header (code "
                                                                "idempotency_key_required)"),
    401: OpenApiResponse(ErrorSerializer, description="no or invalid credentials (code not_authenticated "
                                                      "or authentication_failed)"),
    403: OpenApiResponse(ErrorSerializer, description="the caller may see the study but not do this "
                                                      "(code permission_denied)"),
    404: OpenApiResponse(ErrorSerializer, description="no such study or object, or one the caller may not "
                                                      "know exists (code not_found)"),
    409: OpenApiResponse(ErrorSerializer, description="conflicts with the current state (code conflict)"),
    429: OpenApiResponse(ErrorSerializer, description="too many requests (code throttled); see Retry-After"),
}


def errors(*codes: int) -> dict:
    """OpenAPI error responses; 401 and 429 apply to every endpoint."""
    return {code: _ERRORS[code] for code in sorted({401, 429, *codes})}


def _study(slug: str) -> Study:
    return get_object_or_404(Study.objects.select_related("metric"), slug=slug)


def _researcher_study(request, slug: str) -> Study:
    study = _study(slug)
    access_study_as_researcher(request.user, study)
    return study


class Pagination(PageNumberPagination):
    """DRF's page-number pagination, but a page_size that is not an integer in [1, max_page_size]
    or a page that is not a positive integer is a 400 (DRF silently served the default page
    size, and the first page for an empty page), and the schema says so. The judgements'."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not raw.isdecimal() or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: [f"an integer from 1 to {self.max_page_size}"]})
        return int(raw)

    def get_page_number(self, request, paginator):
        raw = request.query_params.get(self.page_query_param)
        if raw is None:
            return 1
        if raw in self.last_page_strings:
            return raw
        if not raw.isdecimal() or int(raw) < 1:
            raise ValidationError({self.page_query_param: ["a positive integer (or \"last\")"]})
        return raw

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
            elif parameter["name"] == self.page_query_param:
                parameter["schema"].update(minimum=1)
        return parameters


class PairPagination(Pagination):
    """The pairs' pages (the study's pairs, its decisions): 1,000 pairs a page by default (45
    systems' 990 in one, about 280 KB); 200 systems' 19,900 in one were 5 MB and a second.
    A client may still ask for every pair of 200 systems in one page."""

    page_size = 1000
    max_page_size = 20000


class StudyListApi(APIView):
    parser_classes = [MultiPartParser]  # a bundle is a file: multipart only, as the schema says

    @extend_schema(operation_id="studies_list", summary="Studies the caller researches (all for staff)",
                   responses={200: serializers.StudySerializer(many=True), **errors()})
    def get(self, request):
        studies = studies_for_researcher(request.user).select_related("metric").order_by("name")
        return Response(serializers.StudySerializer(studies, many=True).data)

    @extend_schema(operation_id="studies_import", summary="Import a study: a bundle (JSON Lines, optionally "
                   "gzipped), or tables and tools' output files with their column roles",
                   request=serializers.StudyImportSerializer,
                   responses={201: serializers.StudySerializer,
                              422: OpenApiResponse(BundleErrorSerializer, description="the file is not a "
                                                   "valid bundle (code invalid_bundle): every problem with its "
                                                   "line; also an unknown metric or a slug in use"),
                              **errors(400, 403)})
    def post(self, request):
        access_study_creation(request.user)
        form = serializers.StudyImportSerializer(data=request.data)
        if not form.is_valid():
            if set(form.errors) == {"bundle"}:
                # No file, or an empty one (clients differ in which of the two an empty part
                # arrives as): a bundle the app cannot read, like any other invalid bundle.
                raise BundleInvalid(BundleError([BundleProblem(0, "no bundle: the file is missing or empty")]))
            raise ValidationError(form.errors)
        data = form.validated_data
        files = [(f.name, f.file) for f in (data["bundle"], *data.get("files", ()))]
        try:
            source = files[0][1]
            if len(files) > 1 or data.get("columns") or data.get("compute") or not tables.is_bundle(source):
                source = tables.import_source(
                    files, columns=tables.parse_columns(data["columns"]) if data.get("columns") else None,
                    name=data.get("name") or None, text_format=data.get("text_format") or None,
                    compute=sorted(data.get("compute") or ()))
        except BundleError as exc:
            raise BundleInvalid(exc) from exc
        try:
            study = services.studies.study_import(source=source,
                                                  slug=form.validated_data.get("slug") or None,
                                                  metric="" if form.validated_data["human_only"] else
                                                  (form.validated_data.get("metric") or None),
                                                  metric_required=True, created_by=request.user,
                                                  study_settings={s.name: form.validated_data.get(s.name)
                                                                  for s in serializers.IMPORT_SETTINGS})
        except BundleError as exc:
            raise BundleInvalid(exc) from exc
        return Response(serializers.StudySerializer(study).data, status=status.HTTP_201_CREATED)


class StudyDetailApi(APIView):
    @extend_schema(operation_id="study_detail", summary="A study: settings, budget, pair statuses and a link to "
                                                         "its pairs",
                   responses={200: serializers.StudyDetailSerializer, **errors(403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        # the dashboard's data per round from the cache, as the dashboard reads it, but never the
        # last round's; computed in every request it took 52 s at 200 systems
        data = reports.study_dashboard(study=study, current=True)
        # the pairs are paged at pairs_url: all 19,900 of 200 systems made 5 MB here
        return Response({**serializers.StudySerializer(study).data, "budget": data["budget"],
                         "statuses": data["statuses"], "favi_summary": data["favi_summary"], "spa": data["spa"],
                         "leaderboard": data["leaderboard"], "judges": data["judges"],
                         "pair_count": len(data["pairs"]),
                         "pairs_url": request.build_absolute_uri(reverse("api_study_pairs", kwargs={"slug": slug}))})


class StudySettingsApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(operation_id="study_settings", summary="A study's changeable settings",
                   responses={200: serializers.StudySettingsSerializer, **errors(403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        return Response(serializers.StudySettingsSerializer(study).data)

    @extend_schema(operation_id="study_settings_update",
                   summary="Pause, resume or finish a study, change its budget or other settings",
                   description="Send only the fields to change. A value outside its field's schema is a "
                               "400. A valid value that a rule refuses for this study is a 409 naming the "
                               "rule: a budget below the judgements already spent plus those asked for in "
                               "open rounds, a session_hits_max below session_hits_min, checks asked for "
                               "in a study without check items, launching a draft (its settings page "
                               "launches it). A larger budget opens new rounds at once.",
                   request=serializers.StudySettingsSerializer(partial=True),
                   responses={200: serializers.StudySettingsSerializer, **errors(400, 403, 404, 409)})
    def patch(self, request, slug):
        study = _researcher_study(request, slug)
        form = serializers.StudySettingsSerializer(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        try:  # all of the request or none of it
            study = services.studies.study_settings_update(study=study, changes=form.validated_data)
        except DjangoValidationError as exc:  # the request is well-formed; a rule of the study refuses it
            raise Conflict(" ".join(exc.messages)) from exc
        except ValueError as exc:
            raise Conflict(str(exc)) from exc
        return Response(serializers.StudySettingsSerializer(study).data)


class StudyDecisionsApi(APIView):
    @extend_schema(operation_id="study_decisions",
                   summary="The protocol's decision for every system pair (+1 first better, -1 second, 0 open), "
                           "the pairs paged",
                   description=f"`pairs` holds a page of the pairs (`page`, `page_size` up to "
                               f"{PairPagination.max_page_size}, default {PairPagination.page_size}); `count` "
                               "is every pair's, `next` and `previous` link the neighbouring pages (null at "
                               "the ends). The rest is the study's whole, on every page.",
                   parameters=[OpenApiParameter("page", {"type": "integer", "minimum": 1},
                                                description="a page number; default 1"),
                               OpenApiParameter("page_size", {"type": "integer", "minimum": 1,
                                                              "maximum": PairPagination.max_page_size},
                                                description=f"pairs a page; default {PairPagination.page_size}")],
                   responses={200: serializers.DecisionListSerializer, **errors(400, 403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        data = reports.study_dashboard(study=study, current=True)  # (as the study's detail)
        paginator = PairPagination()
        pairs = paginator.paginate_queryset(data["pairs"], request, view=self)
        # The decisions carry the rule they were made with and what it guarantees (guarantees.py).
        return Response(serializers.DecisionListSerializer({
            **data, "pairs": pairs, "count": paginator.page.paginator.count, "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
            "rule": study.protocol_rule, "guarantee": study.guarantee,
            "family_guarantee": study.family_guarantee, "policy_warning": study.policy_warning,
            "order_claims": selectors.fragility.order_claims(data["ranking"]),
            "top_claims": selectors.fragility.top_claims(data["ranking"])}).data)


class StudyLeaderboardApi(APIView):
    @extend_schema(operation_id="study_leaderboard",
                   summary="Systems ranked by the protocol's decisions (layers of the significance DAG)",
                   responses={200: serializers.LeaderboardEntrySerializer(many=True), **errors(403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        return Response(serializers.LeaderboardEntrySerializer(selectors.dashboard.study_leaderboard(study=study),
                                                               many=True).data)


class StudyStyleLeaderboardApi(APIView):
    @extend_schema(operation_id="study_style_leaderboard",
                   summary="The style-controlled leaderboard: Bradley–Terry with answer length, markdown and "
                           "position shown as covariates (the Arena's model), with the covariates' effects",
                   description="Ratings on the Arena scale with 95 % sandwich intervals clustered by prompt, "
                               "recomputed once per closed round (as the dashboard). available is false, with "
                               "the reason, before the fit exists (no judgements, or a system that won or lost "
                               "every judgement).",
                   responses={200: serializers.StyleLeaderboardSerializer, **errors(403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        board = reports.study_dashboard(study=study).get("style_leaderboard") or {
            "available": False, "reason": "the study has no systems", "votes": 0, "level": 0.95, "features": []}
        return Response(serializers.StyleLeaderboardSerializer(board).data)


class StudyJudgementsApi(ListAPIView):
    serializer_class = serializers.JudgementSerializer
    pagination_class = Pagination

    @extend_schema(operation_id="study_judgements", summary="The study's judgements, oldest first, paged",
                   parameters=[
                       OpenApiParameter("first", str, description="a system: with second, their pair (either "
                                                                   "order); alone, every pair of this system"),
                       OpenApiParameter("second", str, description="the other system of the pair"),
                       OpenApiParameter("annotator", str, description="an annotator's external id"),
                       OpenApiParameter("platform", str, enum=["local", "prolific", "mturk", "import"]),
                   ],
                   responses={200: serializers.JudgementSerializer(many=True), **errors(400, 403, 404)})
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        study = _researcher_study(self.request, self.kwargs["slug"])
        filters = serializers.JudgementFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return selectors.studies.study_judgements(study=study, **filters.validated_data)


class StudyPairsApi(ListAPIView):
    serializer_class = serializers.PairSerializer
    pagination_class = PairPagination

    @extend_schema(operation_id="study_pairs", summary="Every pair's state (the study detail's pairs), paged",
                   description="From the dashboard's data of the current round, as the study detail, in "
                               "its matrix's order (the leaderboard's, by first system then second): a round "
                               "that closes between two pages may reorder them.",
                   responses={200: serializers.PairSerializer(many=True), **errors(400, 403, 404)})
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        study = _researcher_study(self.request, self.kwargs["slug"])
        return reports.study_dashboard(study=study, current=True)["pairs"]


class StudyAnnotatorsApi(APIView):
    @extend_schema(operation_id="study_annotators",
                   summary="Annotator quality: per worker statistics and flags (docs/quality.md), sortable",
                   parameters=[
                       OpenApiParameter("sort", str, enum=sorted(selectors.quality.QUALITY_SORTS),
                                        description="column to sort by (default annotator)"),
                       OpenApiParameter("order", str, enum=["asc", "desc"], description="default asc"),
                   ],
                   responses={200: serializers.AnnotatorQualitySerializer(many=True), **errors(400, 403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        order = request.query_params.get("order", "asc")
        if order not in ("asc", "desc"):
            raise ValidationError({"order": ["asc or desc"]})
        try:
            rows = selectors.quality.study_annotator_quality(
                study=study, sort=request.query_params.get("sort", "annotator"), descending=order == "desc")
        except ValueError as exc:
            raise ValidationError({"sort": [str(exc)]}) from exc
        return Response(serializers.AnnotatorQualitySerializer(rows, many=True).data)


class AnnotatorExclusionApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(operation_id="study_annotator_exclusion",
                   summary="Exclude a worker (their judgements leave the protocol; affected pairs are re-decided "
                           "off the request path) or re-include them",
                   request=serializers.ExclusionSerializer,
                   responses={200: serializers.ExclusionResultSerializer, **errors(400, 403, 404)})
    def post(self, request, slug, annotator_id):
        study = _researcher_study(request, slug)
        annotator = get_object_or_404(Annotator, pk=annotator_id)
        form = serializers.ExclusionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        excluded, reason = form.validated_data["excluded"], form.validated_data["reason"]
        change = services.quality.annotator_exclude if excluded else services.quality.annotator_include
        try:
            changed = change(study=study, annotator=annotator, user=request.user, reason=reason)
        except QualityError as exc:
            # A worker without work in this study is not one the caller may name here.
            raise NotFound(str(exc)) from exc
        return Response({"annotator_id": annotator.pk, "excluded": excluded, "changed": changed})


class StudyReportApi(APIView):
    @extend_schema(operation_id="study_report",
                   summary="How the metric compares with the study's human labels (protocol.report)",
                   parameters=[OpenApiParameter("metric", str, description="default: the study's metric")],
                   responses={200: serializers.MetricReportSerializer,
                              409: OpenApiResponse(ErrorSerializer, description="no metric, unknown metric or no "
                                                   "human labels to compare with yet (code conflict)"),
                              **errors(400, 403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        try:
            report = selectors.dashboard.study_metric_report(study=study,
                                                             metric=request.query_params.get("metric") or None)
        except ValueError as exc:
            raise Conflict(str(exc)) from exc
        return Response(serializers.MetricReportSerializer(report).data)


EXPORT_TYPES = {"jsonl": "application/x-ndjson", "parquet": "application/vnd.apache.parquet",
                "card": "text/markdown; charset=utf-8"}


class StudyExportApi(APIView):
    @extend_schema(
        operation_id="study_export",
        summary="The study as a bundle, or its judgements as training-ready preference data (TRL's formats)",
        parameters=[
            OpenApiParameter("dataset", str, enum=["bundle", *PREFERENCE_FORMATS], description=(
                "bundle (default): the study bundle (JSON Lines); trl: prompt / chosen / rejected; "
                "trl-conversational: the same as messages; kto: prompt / completion / label")),
            OpenApiParameter("file", str, enum=list(EXPORT_TYPES), description="jsonl (default), parquet, or "
                             "card: the dataset card (the rule for ties and disagreements, the methods); a "
                             "dataset's only"),
            OpenApiParameter("min_agreement", {"type": "number", "minimum": 0, "maximum": 1},
                             description="leave out comparisons whose majority has a smaller share of the votes")],
        responses={(200, "application/x-ndjson"): OpenApiTypes.BINARY,
                   (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
                   (200, "text/markdown"): OpenApiTypes.STR,
                   409: OpenApiResponse(ErrorSerializer, description="a bundle asked for as parquet or card "
                                        "(code conflict)"),
                   **errors(400, 403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        dataset, kind = request.query_params.get("dataset", "bundle"), request.query_params.get("file", "jsonl")
        if dataset not in ("bundle", *PREFERENCE_FORMATS):
            raise ValidationError({"dataset": [f"one of bundle, {', '.join(PREFERENCE_FORMATS)}, got {dataset!r}"]})
        if kind not in EXPORT_TYPES:
            raise ValidationError({"file": [f"one of {', '.join(EXPORT_TYPES)}, got {kind!r}"]})
        try:
            agreement = float(request.query_params.get("min_agreement", 0))
        except ValueError:
            agreement = -1.0
        if not 0 <= agreement <= 1:
            raise ValidationError({"min_agreement": ["a number from 0 to 1"]})
        if dataset == "bundle" and kind != "jsonl":
            raise Conflict("the study bundle is JSON Lines: ask for file=jsonl, or for a dataset's parquet or card")
        if dataset == "bundle":
            rows = list(selectors.exports.study_export_rows(study=study))
            body, name = selectors.exports.preference_jsonl(rows), f"{study.slug}.jsonl"
        else:
            rows, summary = selectors.exports.study_preference_rows(study=study, form=dataset, min_agreement=agreement)
            if kind == "card":
                body = selectors.exports.study_dataset_card(study=study, form=dataset, summary=summary,
                                                            min_agreement=agreement).encode()
                name = f"{study.slug}-{dataset}.README.md"
            else:
                write = selectors.exports.preference_parquet if kind == "parquet" else selectors.exports.preference_jsonl
                body = write(rows)
                name = f"{study.slug}-{dataset}.{kind}"
        response = HttpResponse(body, content_type=EXPORT_TYPES[kind])
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
class StudyJudgesApi(APIView):
    @extend_schema(operation_id="study_judges",
                   summary="The study's LLM judges against the humans (position bias, flip rate, agreement, "
                           "Cohen's κ, balanced agreement, savings bound) and its judge runs",
                   responses={200: serializers.StudyJudgesSerializer, **errors(403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        return Response(serializers.StudyJudgesSerializer({
            "judges": selectors.studies.study_judges(study=study),
            "runs": selectors.judges.study_judge_runs(study=study)}).data)


class StudyMembersApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(operation_id="study_members", summary="The study's researchers and annotators",
                   responses={200: serializers.MemberSerializer(many=True), **errors(403, 404)})
    def get(self, request, slug):
        study = _researcher_study(request, slug)
        return Response(serializers.MemberSerializer(selectors.studies.study_members(study=study), many=True).data)

    @extend_schema(operation_id="study_members_set", summary="Add a user to the study (or change their role)",
                   description="404 when no user has this name; 409 when the change would leave the study "
                               "without a researcher.",
                   request=serializers.MemberAddSerializer,
                   responses={200: serializers.MemberSerializer, **errors(400, 403, 404, 409)})
    def post(self, request, slug):
        study = _researcher_study(request, slug)
        form = serializers.MemberAddSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        user = get_user_model().objects.filter(username=form.validated_data["username"]).first()
        if user is None:  # a well-formed name of nobody: the object named does not exist
            raise NotFound("no user with this name")
        try:
            membership = services.members.study_membership_set(study=study, user=user, role=form.validated_data["role"])
        except ValueError as exc:  # demoting the last researcher
            raise Conflict(str(exc)) from exc
        return Response(serializers.MemberSerializer(membership).data)


class StudyMemberApi(APIView):
    @extend_schema(operation_id="study_members_remove", summary="Remove a user from the study",
                   responses={204: None, **errors(403, 404, 409)})
    def delete(self, request, slug, username):
        study = _researcher_study(request, slug)
        user = get_object_or_404(get_user_model(), username=username, study_memberships__study=study)
        try:
            services.members.study_membership_remove(study=study, user=user)
        except ValueError as exc:
            raise Conflict(str(exc)) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


class HitNextApi(APIView):
    @extend_schema(operation_id="hits_next", summary="Lease the caller's next HIT of the study",
                   description="The same HIT comes back until it is answered or its lease expires. 204 when "
                               "there is no work for the caller (the study is paused or finished, or "
                               "everything is judged or leased).",
                   request=None,
                   responses={200: serializers.HitSerializer, 204: OpenApiResponse(description="no work now"),
                              **errors(404)})
    def post(self, request, slug):
        study = _study(slug)
        worker = access_api_worker(request.user, study)
        access_study_running(study)
        annotator = worker.annotator or services.hits.annotator_for_user(user=request.user)
        hit = services.hits.hit_next_for_annotator(study=study, annotator=annotator)
        if hit is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(serializers.HitSerializer(selectors.serving.hit_display(assignment=hit, study=study)).data)


class HitSubmitApi(APIView):
    parser_classes = [JSONParser]
    throttle_classes = [ApiTokenThrottle, SubmitThrottle]

    @extend_schema(operation_id="hits_submit", summary="Answer a HIT (idempotent on Idempotency-Key)",
                   description="Repeating a request with the same key returns the first answer unchanged.",
                   request=serializers.SubmitSerializer,
                   parameters=[OpenApiParameter("Idempotency-Key", IDEMPOTENCY_KEY_SCHEMA, OpenApiParameter.HEADER,
                                                required=True,
                                                description="unique per answer, 1 to 64 characters (none or "
                                                            "empty: 400, code idempotency_key_required)")],
                   responses={200: serializers.SubmitResultSerializer, **errors(400, 404, 409)})
    def post(self, request, hit_id):
        # The header first: a request without it is malformed whoever sends it (and says nothing
        # of whether the HIT exists); then who asks.
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            raise IdempotencyKeyRequired()
        if len(key) > IDEMPOTENCY_KEY_SCHEMA["maxLength"]:
            raise ValidationError({"Idempotency-Key": ["at most 64 characters"]})
        assignment = get_object_or_404(Assignment.objects.select_related(
            "annotator", "comparison__first", "comparison__second", "comparison__item"), pk=hit_id)
        access_hit_of_user(request.user, assignment)
        form = serializers.SubmitSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            judgement = services.hits.judgement_submit(
                assignment=assignment, annotator=assignment.annotator,
                shown_value=SHOWN_ANSWERS.get(form.validated_data.get("answer"), 99), idempotency_key=key,
                answers=form.validated_data.get("answers"), seconds_on_task=form.validated_data.get("seconds_on_task"),
                read_seconds=form.validated_data.get("read_seconds"))
        except HitError as exc:
            raise Conflict(str(exc)) from exc
        return Response({"judgement": judgement.pk, "value": judgement.value}, status=status.HTTP_200_OK)


@csrf_exempt  # it changes nothing; a POST to an unknown address is a 404, not a CSRF failure
def api_not_found(request, *args, **kwargs):
    """Every unknown /api/ address: 404 in the API's error shape, whatever the method."""
    return JsonResponse({"detail": "No API endpoint at this address.", "code": "not_found"}, status=404)
