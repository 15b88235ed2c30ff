"""A run's cost before it starts (``pytest-libero plan``): this machine's phase costs
(``probe.py``), the policy's latency (``latency.py``), the cases as the model sees them
(``shapes.py``), the model (``model.py``), a deciding run's expected share
(``decided.py``), the text (``report.py``) and the command (``command.py``)."""
