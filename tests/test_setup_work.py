"""The set-up's unseen renders and repeated compiles are skipped, and no byte changes.

adapters/setup_work.py skips the camera renders and GL contexts LIBERO's build and hard
resets make for nobody, and compiles a task's scene once per set-up. These tests hold
the claim: a case set up that way sees the same identity, images, proprio and physics,
control by control, as one set up by robosuite as shipped; the set-up opens one GL
context and renders only the first observation; and the switches act only on the
setting-up thread, only inside their block.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
from typing import Any

import numpy as np
import pytest

from pytest_libero.catalog.entries import Entry, load_catalog

pytestmark = pytest.mark.simulator


def _entry(suite: str, index: int) -> Entry:
    return next(e for e in load_catalog().suite_entries(suite) if e.index == index)


def _seen(entry: Entry) -> tuple[str, dict[str, Any]]:
    """A digest of everything a case of ``entry`` sees over six random controls, and its
    identity less file paths."""
    from pytest_libero.adapters.libero import LiberoEpisode

    actions = np.random.default_rng(0).uniform(-0.5, 0.5, size=(6, 7))
    with LiberoEpisode(entry, track="rgb+proprio", control_cap=8) as episode:
        identity = {k: v for k, v in episode.identity.items() if not k.endswith("_file")}
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode())
        for n, action in enumerate((None, *actions)):
            if action is not None:
                episode.step(action)
            observation = episode.observe(n, n)
            for camera in sorted(observation.images):
                digest.update(observation.images[camera].tobytes())
            assert observation.proprio is not None
            digest.update(observation.proprio.tobytes())
            digest.update(episode.env.sim.get_state().flatten().tobytes())
    return digest.hexdigest(), identity


@pytest.mark.parametrize("entry", [
    # libero_10 task 3's fixtures have a placement range: the reset draws them; full mode
    # also makes two positioning resets before the episode's own.
    _entry("libero_10", 3).at_state(2),
    # A texture kind uploads its textures to the context the case keeps.
    _entry("libero_goal", 2).perturbed("object", 3),
], ids=lambda e: e.case_id)
def test_a_case_sees_what_robosuite_as_shipped_would_show_it(entry: Entry,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_libero.adapters import libero

    lean, identity = _seen(entry)
    monkeypatch.setattr(libero, "unseen_renders", lambda context: contextlib.nullcontext())
    monkeypatch.setattr(libero, "compiled_once", contextlib.nullcontext)
    shipped, shipped_identity = _seen(entry)
    assert identity == shipped_identity
    assert lean == shipped


def test_a_set_up_opens_one_context_and_renders_only_the_first_observation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import mujoco
    from robosuite.utils import binding_utils

    from pytest_libero.adapters.libero import LiberoEpisode

    counted = {"contexts": 0, "renders": 0, "compiles": 0}

    def counting(name: str, call: Any) -> Any:
        def count(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return call(*args, **kwargs)
        return count

    context = binding_utils.MjRenderContext
    monkeypatch.setattr(context, "_set_mujoco_context_and_buffers",
                        counting("contexts", context._set_mujoco_context_and_buffers))
    monkeypatch.setattr(mujoco, "mjr_render", counting("renders", mujoco.mjr_render))
    monkeypatch.setattr(mujoco.MjModel, "from_xml_string",
                        counting("compiles", mujoco.MjModel.from_xml_string))
    entry = _entry("libero_10", 3).at_state(2)  # a build and three hard resets
    with LiberoEpisode(entry, track="rgb", control_cap=2) as episode:
        assert episode.identity["schedule"]["resets_made_here"] == 2
        # robosuite as shipped: 4 contexts, 2 + 3 * 6 camera renders, 4 compiles.
        assert counted == {"contexts": 1, "renders": 2, "compiles": 1}
        assert np.asarray(episode.frame()).any(), "the first observation is a real render"


def test_the_switches_act_on_the_setting_up_thread_inside_the_block_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import mujoco
    from robosuite.environments import base
    from robosuite.utils.binding_utils import MjRenderContextOffscreen, MjSim

    from pytest_libero.adapters.setup_work import compiled_once, unseen_renders
    from pytest_libero.evidence.renderer import SCENE

    sim = MjSim.from_xml_string(SCENE)
    MjRenderContextOffscreen(sim, device_id=-1)

    def drawn(on: Any = sim) -> bool:
        return bool(on.render(camera_name="agentview", width=64, height=64).any())

    def drawn_elsewhere() -> bool:
        """On another thread (a GL context is current on one thread): its own real one."""
        other = MjSim.from_xml_string(SCENE)
        base.MjRenderContextOffscreen(other, device_id=-1)
        return drawn(other)

    elsewhere: list[bool] = []
    with unseen_renders(context=False):
        assert not drawn()
        with unseen_renders(context=True):
            assert not drawn()
        assert not drawn()  # the outer block's choice is back
        thread = threading.Thread(target=lambda: elsewhere.append(drawn_elsewhere()))
        thread.start()
        thread.join()
        bare = MjSim.from_xml_string(SCENE)
        base.MjRenderContextOffscreen(bare, device_id=-1)
        assert type(bare._render_context_offscreen).__name__ == "_NoContext"
    assert elsewhere == [True]
    assert drawn()

    def mjb(model: Any) -> bytes:
        buffer = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
        mujoco.mj_saveModel(model, None, buffer)
        return buffer.tobytes()

    compiles = []
    compile_ = mujoco.MjModel.from_xml_string
    monkeypatch.setattr(mujoco.MjModel, "from_xml_string",
                        lambda xml: compiles.append(xml) or compile_(xml))
    with compiled_once():
        with unseen_renders(context=False):
            thrown = [MjSim.from_xml_string(SCENE), MjSim.from_xml_string(SCENE)]
        kept = MjSim.from_xml_string(SCENE)  # the case's: the compiled model itself
    assert len(compiles) == 1
    models = [made.model._model for made in (*thrown, kept)]
    assert len({id(model) for model in models}) == 3
    assert {mjb(model) for model in models} == {mjb(sim.model._model)}


def test_a_robosuite_imported_again_is_switched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester's in-process runs drop from ``sys.modules`` what they imported: a robosuite
    imported again later is a new one, as shipped, and the next set-up switches it too."""
    from pytest_libero.adapters.setup_work import _SWITCHED, unseen_renders

    with unseen_renders(context=False):
        pass  # the robosuite imported now holds the switches
    for name in [m for m in sys.modules if m == "robosuite" or m.startswith("robosuite.")]:
        monkeypatch.delitem(sys.modules, name)  # put back after the test
    from robosuite.environments import base
    from robosuite.utils.binding_utils import MjSim

    assert _SWITCHED not in vars(MjSim)
    with unseen_renders(context=False):
        frame = MjSim.render(object(), camera_name="agentview", width=4, height=3)
        assert frame.shape == (3, 4, 3) and not frame.any()  # answered without a simulation
        assert base.MjRenderContextOffscreen.__name__ == "switched_opener"
