"""Stand-in package of cuda-python's ``cuda.bindings`` (see ``cuda/__init__.py``)."""
