"""Strategies more than one round composes (named by what they do, never by a round).

A round folder (``rounds/<round>/``) takes from here what its harness shares with others: where a run's results land
(:mod:`.results`), the ``SYSTEM_NAME`` and one-accuracy-target-a-run rules of the per-system config layout
(:mod:`.system_name`). This package holds no ``round.json``: discovery does not take it for a round.
"""
