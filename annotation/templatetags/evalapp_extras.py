"""Small template filters for the researcher screens."""
from django import template

register = template.Library()


@register.filter
def percent(value) -> str:
    """0.8 -> '80 %'."""
    try:
        return f"{100 * float(value):.0f} %"
    except (TypeError, ValueError):
        return ""
