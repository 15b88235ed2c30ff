"""Generated perturbations of any native entry, one object per kind.

``kind`` says what a kind is (its levels, its seeded draw, where it applies, the moments
it acts at and what it records), ``kinds/`` holds one module per shipped kind, and
``registry`` is the one list every other package asks: none of them names a kind.
``levels`` gathers every kind's levels into the table the perturbed identity hashes.
What the kinds share: ``settling`` (draw, settle, judge, draw again), ``contacts``,
``tasks`` (the BDDL's objects), ``tabletop`` and ``rotations``; ``paraphrase`` records a
LIBERO-PRO paraphrase companion. docs/perturbations.md describes each kind.
"""
