"""Deployment checks (``manage.py check --deploy``)."""
from django.conf import settings
from django.core.checks import Tags, Warning, register


@register(Tags.security, deploy=True)
def throttle_cache_shared(app_configs, **kwargs):
    """Rate limits count in the cache: a per-process cache lets N processes accept N times the limit."""
    backend = settings.CACHES["throttle"]["BACKEND"]
    if "locmem" in backend.lower() or "dummy" in backend.lower():
        return [Warning("The cache is per process, so every web process counts requests against the rate "
                        "limits on its own.", hint="Set EVALAPP_CACHE_URL=redis://host:6379/0.",
                        id="evalapp.W001")]
    return []
