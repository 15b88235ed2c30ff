"""Generated perturbations of any native entry: camera, light, robot start, sensor noise.

``levels`` holds the one table of magnitudes and the identity it defines, ``draw`` the
seeded draw of every parameter from (kind, level, case), ``scene`` how the adapter
applies them. docs/perturbations.md describes each kind.
"""
