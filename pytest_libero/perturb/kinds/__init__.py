"""The generated kinds pytest-libero ships, one module each, in the order the option,
the robustness rows and the reports list them."""

from __future__ import annotations

from pytest_libero.perturb.kind import Kind
from pytest_libero.perturb.kinds.camera import Camera
from pytest_libero.perturb.kinds.environment import Environment
from pytest_libero.perturb.kinds.latency import Latency
from pytest_libero.perturb.kinds.light import Light
from pytest_libero.perturb.kinds.noise import Noise
from pytest_libero.perturb.kinds.object import Object
from pytest_libero.perturb.kinds.position import Position
from pytest_libero.perturb.kinds.robot import Robot
from pytest_libero.perturb.kinds.semantic import Semantic

BUILTIN: tuple[Kind, ...] = (Camera(), Light(), Robot(), Noise(), Position(), Environment(),
                             Object(), Semantic(), Latency())
