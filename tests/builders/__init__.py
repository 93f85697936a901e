"""What many tests build, one module per capability; a test imports from the module that holds
what it uses (and fixtures from conftest), never from another test module, so a test file can
move or go without breaking another (tests/test_layout.py).

bundles     bundles as rows and bytes: the small studies most tests import
files       the files researchers have, as they have them (CSV, AlpacaEval, MT-Bench, Parquet ...)
hostile     hostile texts in a bundle and how to tell they stay inert when rendered
studies     stored studies in a given state (comparisons stored, weighted item choice, rounds filled)
annotating  the serving loop through the services: workers, answered HITs, many at once
crowd       the serving loop over HTTP: a worker's start link, HITs served and answered via the pages
spam        honest workers and a spammer (quality control)
judges      LLM judges: studies whose answers carry their true quality for the fake judge
style       the style-controlled leaderboard's study
clients     clients of the cockpit, the admin and the API, and the forms they post
browser     pages in a real browser (Playwright): logging in, upload and worker pages, layout
throttling  rate limits: changed rates, a throttled answer, counts cleared
backends    the database and Redis as the tests see them
"""
