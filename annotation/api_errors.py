"""One shape for every API error: ``{"detail": "...", "code": "..."}`` (+ ``errors`` / ``problems``).

``detail`` is a sentence for a person, ``code`` a stable token for a program. Validation
errors add ``errors`` (field -> messages); an invalid bundle adds ``problems`` (line, message).
"""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.views import defaults
from rest_framework import exceptions, serializers, status
from rest_framework.views import exception_handler as drf_exception_handler


class IdempotencyKeyRequired(exceptions.APIException):
    """No Idempotency-Key header, or an empty one: a 400, as the IETF's Idempotency-Key draft
    says (it was a 428, which no check of a missing required header expects)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "A submit needs an Idempotency-Key header (at most 64 characters, unique per answer)."
    default_code = "idempotency_key_required"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class BundleInvalid(exceptions.APIException):
    """The file is well-formed for the request schema; its content is not a valid bundle (the
    schema cannot describe a JSON Lines file): 422, with every problem and its line."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "invalid study bundle"
    default_code = "invalid_bundle"

    def __init__(self, bundle_error):
        super().__init__()
        self.problem_count = bundle_error.total
        self.problems = [{"line": p.line, "message": p.message} for p in bundle_error.problems]


def _first_code(codes) -> str:
    if isinstance(codes, dict):
        codes = next(iter(codes.values()), "invalid")
    if isinstance(codes, list):
        codes = codes[0] if codes else "invalid"
    return codes if isinstance(codes, str) else _first_code(codes)


def exception_handler(exc, context):
    """DRF's handler, with every error body reshaped to ``{"detail", "code", ...}``."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        errors = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = {"detail": "The request is invalid; see errors.", "code": "invalid",
                         "errors": errors}
    else:
        response.data = {"detail": str(exc.detail), "code": _first_code(exc.get_codes())}
        if isinstance(exc, BundleInvalid):
            response.data.update(problem_count=exc.problem_count, problems=exc.problems)
    return response


def server_error(request, *args, **kwargs):
    """handler500: an error no view handled answers in the API's shape under /api/ (a client
    of the API parses JSON, never Django's HTML page), the 500 page elsewhere. Django has
    logged the exception with its traceback before this runs."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "A server error occurred.", "code": "server_error"}, status=500)
    return defaults.server_error(request, *args, **kwargs)


class ErrorSerializer(serializers.Serializer):
    """Every error answer of the API."""

    detail = serializers.CharField(help_text="what went wrong, for a person")
    code = serializers.CharField(help_text="stable token for a program, e.g. not_found, permission_denied, "
                                           "not_authenticated, throttled, invalid, conflict, "
                                           "idempotency_key_required, server_error")


class ValidationErrorSerializer(ErrorSerializer):
    """A 400: invalid fields (code invalid, with errors) or a body that is not JSON (code parse_error)."""

    errors = serializers.DictField(child=serializers.JSONField(), required=False,
                                   help_text="field -> list of messages (code invalid)")


class BundleProblemSerializer(serializers.Serializer):
    line = serializers.IntegerField(help_text="1-based line of the bundle; 0 = the bundle as a whole")
    message = serializers.CharField()


class BundleErrorSerializer(ErrorSerializer):
    """An import's 400: an invalid bundle (problems with lines) or invalid form fields (errors)."""

    problem_count = serializers.IntegerField(required=False, help_text="invalid bundle only")
    problems = BundleProblemSerializer(many=True, required=False, help_text="invalid bundle only")
    errors = serializers.DictField(child=serializers.JSONField(), required=False,
                                   help_text="invalid form fields only (code invalid)")
