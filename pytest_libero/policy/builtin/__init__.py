"""The in-process family: policies that run in the case's own process, with no server
and no wire (``transport = "inprocess"``). ``factory`` imports a profile's
``policy.factory`` (``module:callable``), calls it with the policy options and checks
that it built a policy; it holds the inprocess transport, and ``python -m
pytest_libero.serve --policy`` builds the policy it serves the same way. ``policies``
holds the built-in reference policies zero, random and replay, ``demo`` the one that
plays the shipped recorded demonstrations (all infrastructure evidence, never a
capability claim). They are named here, at the package, because the shipped profiles
name them so (``policy.factory = "pytest_libero.policy.builtin:ZeroPolicy"``)
and that text is part of each run's recorded profile.
"""

from pytest_libero.policy.builtin.demo import DemoPolicy
from pytest_libero.policy.builtin.policies import RandomPolicy, ReplayPolicy, ZeroPolicy

__all__ = ["DemoPolicy", "RandomPolicy", "ReplayPolicy", "ZeroPolicy"]
