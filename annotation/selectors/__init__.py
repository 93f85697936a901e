"""Reads, one module per screen (HackSoft: reads in selectors, writes in services):

serving     the annotator's screens and the serving loop: the HIT shown, the worker's session,
            whether there is work, the audit of serving's invariants
dashboard   the researcher dashboard and the pair page (leaderboard, pair matrix, budget, the
            metric against the humans, the charts)
quality     which judgements count; the annotator quality table and the exclusion log
studies     a study as a whole: home list, progress, labels and pairs for the protocol,
            judgements, members, planner jobs; its LLM judges against the humans
judges      a study's judge runs: progress and cost
exports     the stored study as bundle rows (export, the planner's and the report's bundle)
style       the style-controlled leaderboard (Bradley–Terry with the answers' style as covariates)
fragility   how many counted judgements each decided pair rests on
items       the item reader and the item search: one item's texts, judgements, metric and
            judges' verdicts and reports; the study's items by text

A view, a command or a test reaches a read through its module — ``selectors.serving.hit_display(...)``
or ``from annotation.selectors.serving import hit_display`` — as it reaches a write
(``services.hits.judgement_submit(...)``), so the reader sees where each lives; this package
re-exports nothing (tests/test_import_layers.py holds every caller to it). The modules import
one another in the order above from the bottom; each is imported here so that
``selectors.<module>`` is bound.
"""
from . import quality, studies, judges, exports, serving, style, fragility, dashboard, items  # noqa: F401
