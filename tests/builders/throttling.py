"""Rate limits: settings with some rates changed, a throttled answer, counts cleared."""
from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from redis.exceptions import ConnectionError as RedisConnectionError


def rates(settings, **overrides):
    settings.EVALAPP_THROTTLE_RATES = {**settings.EVALAPP_THROTTLE_RATES, **overrides}


def assert_throttled(response):
    assert response.status_code == 429, response.content[:200]
    assert 1 <= int(response["Retry-After"]) <= 60


def clear_throttle_counts() -> None:
    """Forget throttle counts: a store of this run's own (memory, a test's directory) is
    cleared; on Redis only this run's prefixed keys go."""
    for alias in ("default", "throttle"):
        cache = caches[alias]
        if "redis" not in settings.CACHES[alias]["BACKEND"].lower():
            cache.clear()
            continue
        client = cache._cache.get_client(None, write=True)
        prefix = settings.CACHES[alias]["KEY_PREFIX"]
        try:
            for key in client.scan_iter(match=f"{prefix}:*"):
                client.delete(key)
        except RedisConnectionError:  # a Redis a test made unreachable holds nothing of the run
            pass
