"""Small template filters for the researcher screens and the HIT page."""
from django import template

from ..rubrics import rubric_keys

register = template.Library()


@register.filter
def percent(value) -> str:
    """0.8 -> '80 %'."""
    try:
        return f"{100 * float(value):.0f} %"
    except (TypeError, ValueError):
        return ""


@register.filter
def answer_keys(criteria: list[dict]) -> str:
    """The digits that answer a rubric's criteria (rubrics.rubric_keys): the HIT page's data-keys."""
    return rubric_keys(criteria)
