"""How far an episode got toward its BDDL goal: each goal predicate as LIBERO evaluates
it (``progress.py``), and the partial-credit score made of that (``score.py``)."""
