"""The errors of the app's writes, in one place: each is a ValueError whose message says what is
wrong, shown to the user (an annotator, a crowd worker, a researcher) as it is."""


class HitError(ValueError):
    """A HIT cannot be served or submitted; the message says why (shown to the annotator)."""


class CrowdEntryRefused(ValueError):
    """A crowd worker's entry is refused; the message says why (shown to the worker)."""


class QualityError(ValueError):
    """An exclusion or re-inclusion that cannot be done; the message says why."""
