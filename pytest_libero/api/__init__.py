"""Evaluating from a training loop: ``pytest_libero.evaluate`` (``evaluate.py``), the
keyword table it shares with the plugin's options (``keywords.py``), a policy object
served from the caller's process (``served.py``) and what a call returns
(``evaluation.py``)."""
