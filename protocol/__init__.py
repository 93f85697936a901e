"""evalapp's statistics: pure functions over arrays, no Django.

Modules
-------
bundle       read, validate and write study bundles (JSON Lines, optionally gzipped)
preferences  preferences from scalar scores, per-pair label tables from a bundle
decision     the Bayesian decision function (NUTS reference and a fast exact sampler)
adaptive     the budgeted protocol as a resumable state machine
favi         Favi-Score and sign accuracy
ranking      sign tests, significance DAGs, decision-set comparison
spa          soft pairwise accuracy
similarity, separability   separability of comparisons and weighted item choice

A researcher can use every module from a notebook; the web app turns database rows into
the same arrays.
"""
