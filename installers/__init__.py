"""Dependency installers: planners that turn (parameters, facts) into commands, then verify.

Each module holds one profile step type (registered in :mod:`workload.registry`). Imports are
one-way: ``workload.installers`` uses the rest of ``workload``; the rest reaches these steps only through the
registry. The folder sits at the top of the repository and installs as ``workload.installers`` (pyproject.toml),
so nothing generic lands at the top of site-packages.
"""
