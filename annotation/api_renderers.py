"""JSON for the API: undefined statistics (NaN, ±inf) become null instead of a server error."""
from __future__ import annotations

import math

from rest_framework.renderers import JSONRenderer


def finite_or_none(value):
    """``value`` with every non-finite float (at any depth of dicts, lists, tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


class FiniteJSONRenderer(JSONRenderer):
    """JSON has no NaN: a Favi-Score without errors or an undefined mean is sent as null."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return super().render(finite_or_none(data), accepted_media_type, renderer_context)
