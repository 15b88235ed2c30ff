"""Generated perturbations of any native entry: camera, light, robot start, sensor noise,
object positions, distractors and textures.

``levels`` holds the one table of magnitudes and the identity it defines, ``draw`` the
seeded draw of every parameter from (kind, level, case, attempt), one function per kind.
How the adapter applies them: ``scene`` (camera, light, robot, noise), ``position``,
``environment``; ``contacts`` judges a settled scene, ``tasks`` reads which task objects
may move from the BDDL. docs/perturbations.md describes each kind.
"""
