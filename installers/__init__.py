"""Dependency installers: planners that turn (parameters, facts) into commands, then verify.

Each module holds one profile step type (registered in :mod:`workload.registry`). Imports are
one-way: ``installers`` uses ``workload``; ``workload`` reaches installers only through the registry.
"""
