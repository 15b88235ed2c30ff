"""Bridges: factories that serve another framework's policy through ``pytest_libero.serve``.

A bridge runs in the model's own environment (its torch, its CUDA), is named on the
serving command line as ``--policy pytest_libero.bridges.<family>:make``, and imports
its framework only when called, so pytest-libero never depends on it.
"""
