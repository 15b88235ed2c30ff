"""Imported by each worker's forkserver: what every case process would otherwise redo.

Every case process is forked from that server (``episode/host/launch.py``), so it starts with
robosuite, LIBERO and MuJoCo imported, the encoder's version known, and MuJoCo's asset
cache (decoded meshes and textures, kept per process) filled by one compile of a
scene: the worker's first case's, named by ``PYTEST_LIBERO_WARM_SCENE`` (its BDDL and init-state file names).
The robot, the arena and the objects scenes share then compile from the cache in every
case process (bench/throughput.py measures it). Nothing that renders is built here, so
no GL context or renderer thread exists when the server forks. Anything that fails
here is left for the case to meet: the case imports and builds the same things again
and records the error itself.
"""

from __future__ import annotations

import os
import warnings
from contextlib import suppress

from pytest_libero.episode.host.launch import WARM_SCENE
from pytest_libero.protocol.rendering import prepare_simulator_environment


def _compile_scene(bddl_file: str, init_states_file: str) -> None:
    """Build (and so compile) the scene's model without any renderer, then drop it."""
    import numpy as np
    from libero.libero.envs.env_wrapper import ControlEnv

    from pytest_libero.catalog.inventory import installed_files

    bddl, _ = installed_files(bddl_file, init_states_file)
    random_state = np.random.get_state()
    try:
        env = ControlEnv(bddl_file_name=str(bddl), has_renderer=False,
                         has_offscreen_renderer=False, use_camera_obs=False, ignore_done=True)
        env.close()
    finally:
        np.random.set_state(random_state)  # the case processes start where they would have


prepare_simulator_environment()
with suppress(Exception), warnings.catch_warnings():
    # robosuite calls a deprecated logging method at import time.
    warnings.simplefilter("ignore", DeprecationWarning)
    import libero.libero.envs  # noqa: F401

    import pytest_libero.episode.case  # noqa: F401
    from pytest_libero.evidence.ffmpeg import ffmpeg_version

    ffmpeg_version()  # cached: no `ffmpeg -version` per case

    if os.environ.get(WARM_SCENE):
        _compile_scene(*os.environ[WARM_SCENE].split(os.pathsep, 1))
