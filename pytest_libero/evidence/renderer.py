"""The renderer's fingerprint: a fixed reference frame, rendered and hashed.

The policy sees pixels, so the GL stack that draws them is part of the evidence: Mesa's
llvmpipe on a CPU and NVIDIA's EGL differ in the last bits, and a Mesa or MuJoCo update
can change them. :func:`measure` renders one fixed scene from both protocol cameras at
256x256 through the path LIBERO's cameras take (robosuite's ``MjSim`` and offscreen
render context on the ``MUJOCO_GL`` backend, robosuite's image convention, then the
protocol's ``image[::-1, ::-1]``) and returns the sha256 of what a policy would be
delivered, with what the GL stack says about itself (vendor, renderer, version).

The scene is small on purpose (compiled in milliseconds, no mesh or image file to
decode) but holds what decides LIBERO's pixels: multisampled offscreen rendering at the
model's default quality, a skybox, mipmapped 2D textures at grazing angles (texrepeat,
texuniform) and a cube texture, LIBERO's two point lights with specular highlights plus
the headlight, a reflective table top, a translucent object, primitive and mesh geoms,
collision geoms hidden as robosuite hides them, a fixed camera at LIBERO's agentview
pose and a camera on a moving body at the robot's eye-in-hand pose and field of view.
docs/reliability.md says why this identifies a renderer as well as a LIBERO scene.

Two fingerprints name the same renderer only when every key of :data:`IDENTITY_KEYS`
is equal and the frame was rendered at all; ``data/renderers.json`` lists the ones this
package has measured.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import warnings
from collections.abc import Mapping
from functools import cache
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero import children
from pytest_libero.files import tail_of
from pytest_libero.protocol.hashing import array_sha256, canonical_json, sha256_bytes
from pytest_libero.protocol.parameters import CAMERAS, IMAGE_SIZE
from pytest_libero.protocol.rendering import headless_rendering, prepare_simulator_environment
from pytest_libero.protocol.shipped import need, reading, shipped_json

REFERENCE_FRAME = "pytest-libero-reference-frame/1"
"""Names the scene below; a changed scene is a new frame, and every fingerprint moves."""
IDENTITY_KEYS = ("frame", "sha256", "backend", "vendor", "renderer", "version")
"""What two fingerprints must share to be one renderer (the record's copy holds these)."""
KNOWN_FILE = "renderers.json"
KNOWN_SCHEMA = "pytest-libero-known-renderers/1"
MEASURE_TIMEOUT_S = 180.0
"""How long a measuring process may take before it is killed (a hung GL driver)."""

SCENE = """
<mujoco model="pytest-libero-reference-frame">
  <compiler angle="radian"/>
  <visual><map znear="0.001"/></visual>
  <asset>
    <texture name="sky" type="skybox" builtin="gradient" rgb1=".9 .9 1" rgb2=".2 .3 .4"
             width="256" height="256"/>
    <texture name="floor" type="2d" builtin="checker" rgb1=".45 .4 .35" rgb2=".7 .68 .6"
             mark="edge" markrgb=".2 .2 .2" width="512" height="512"/>
    <material name="floor" texture="floor" texrepeat="3 3" texuniform="true" specular="0"
              shininess="0" reflectance="0"/>
    <texture name="table" type="cube" builtin="gradient" rgb1=".75 .55 .35" rgb2=".35 .2 .1"
             width="256" height="256"/>
    <material name="table" texture="table" specular="0.2" shininess="0" reflectance="0.5"/>
    <texture name="wall" type="2d" builtin="checker" rgb1=".8 .8 .78" rgb2=".72 .72 .7"
             width="256" height="256"/>
    <material name="wall" texture="wall" texrepeat="3 3" texuniform="true" specular="0.8"
              shininess="0.1"/>
    <texture name="label" type="2d" builtin="checker" rgb1=".8 .1 .1" rgb2=".95 .9 .8"
             mark="cross" markrgb="0 0 .5" width="128" height="128"/>
    <material name="label" texture="label" texrepeat="2 1" specular="0.5" shininess="0.5"/>
    <material name="robot" rgba=".9 .92 .93 1" specular="0.5" shininess="0.25"/>
    <material name="finger" rgba=".25 .25 .25 1" specular="0.3" shininess="0.5"/>
    <material name="glass" rgba=".3 .6 .9 .4" specular="0.8" shininess="0.9"/>
    <mesh name="wedge" vertex="0 0 0  .06 0 0  0 .06 0  0 0 .06  .06 .06 .03"/>
  </asset>
  <worldbody>
    <light name="light1" pos="1 1 4" dir="0 -.15 -1" directional="false" diffuse=".8 .8 .8"
           specular=".3 .3 .3" castshadow="false"/>
    <light name="light2" pos="-3 -3 4" dir="0 -.15 -1" directional="false" diffuse=".8 .8 .8"
           specular=".3 .3 .3" castshadow="false"/>
    <geom name="floor" type="plane" size="3 3 .125" material="floor" group="1"/>
    <geom name="wall" type="box" pos="-1 0 1.5" size=".01 3 1.5" material="wall" group="1"/>
    <body name="table" pos="0 0 .4">
      <geom type="box" size=".3 .35 .4" material="table" group="1"/>
      <geom type="cylinder" pos=".1 .1 .48" size=".03 .08" material="label" group="1"/>
      <geom type="sphere" pos="-.1 .15 .45" size=".05" material="glass" group="1"/>
      <geom type="capsule" pos="-.15 -.1 .45" euler="0 1.2 .4" size=".02 .06" material="robot"
            group="1"/>
      <geom type="mesh" mesh="wedge" pos=".05 -.15 .41" euler=".3 .2 .5" material="label"
            group="1"/>
      <geom type="box" pos="0 0 .5" size=".05 .05 .05" rgba="1 0 0 .3" group="0"/>
    </body>
    <camera name="agentview" mode="fixed" pos="0.6586131746834771 0 1.6103500240372423"
            quat="0.6380177736282349 0.3048497438430786 0.30484986305236816 0.6380177736282349"/>
    <body name="hand" pos="-.02 .03 1.0" quat="0 0.924 0.383 0">
      <geom type="box" size=".02 .08 .025" material="robot" group="1"/>
      <geom type="box" size=".008 .01 .025" pos="0 .03 .05" material="finger" group="1"/>
      <geom type="box" size=".008 .01 .025" pos="0 -.03 .05" material="finger" group="1"/>
      <camera name="robot0_eye_in_hand" mode="fixed" pos="0.05 0 0" quat="0 0.707108 0.707108 0"
              fovy="75"/>
    </body>
  </worldbody>
</mujoco>
"""


def scene_sha256() -> str:
    """The scene's text, hashed: a golden test holds it, so an edit is never silent."""
    return sha256_bytes(SCENE.encode())


def _import_simulator() -> None:
    """robosuite (and MuJoCo) on the backend the adapter picks; a no-op once imported."""
    prepare_simulator_environment()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # robosuite, at import
        import robosuite.utils.binding_utils  # noqa: F401


def render_reference() -> tuple[dict[str, np.ndarray], dict[str, str | None]]:
    """The reference frame as a policy would be delivered it (camera -> uint8 RGB), and
    the GL strings of the context that drew it. Imports the simulator; raises on failure."""
    _import_simulator()
    from robosuite import macros
    from robosuite.utils.binding_utils import MjRenderContextOffscreen, MjSim
    from robosuite.utils.mjcf_utils import IMAGE_CONVENTION_MAPPING

    sim = MjSim.from_xml_string(SCENE)
    try:
        # As robosuite's environments build it: default device, collision geoms hidden.
        context = MjRenderContextOffscreen(sim, device_id=-1)
        context.vopt.geomgroup[0] = 0
        context.vopt.geomgroup[1] = 1
        strings = _gl_strings()
        convention = IMAGE_CONVENTION_MAPPING[macros.IMAGE_CONVENTION]
        images = {}
        for camera in CAMERAS:
            raw = sim.render(camera_name=camera, width=IMAGE_SIZE, height=IMAGE_SIZE)
            images[camera] = np.ascontiguousarray(raw[::convention][::-1, ::-1])
    finally:
        sim.free()
    return images, strings


def _gl_strings() -> dict[str, str | None]:
    """What the current GL context says it is."""
    from OpenGL import GL  # type: ignore[import-untyped]

    found: dict[str, str | None] = {}
    for key, name in (("vendor", GL.GL_VENDOR), ("renderer", GL.GL_RENDERER),
                      ("version", GL.GL_VERSION)):
        value = GL.glGetString(name)
        found[key] = value.decode("utf-8", errors="replace") if value else None
    return found


def measure() -> dict[str, Any]:
    """This process's fingerprint: never raises; a frame that could not be rendered
    gives ``sha256`` None and the ``error``. ``seconds`` is the rendering's cost once the
    simulator is imported, ``import_s`` what importing it took here (0 where it was)."""
    started = time.perf_counter()
    try:
        _import_simulator()
        imported = time.perf_counter()
        images, strings = render_reference()
    except Exception as exc:  # noqa: BLE001 - any GL or import failure is the answer
        return not_measured(f"{type(exc).__name__}: {exc}")
    cameras = {camera: array_sha256(image) for camera, image in images.items()}
    return {
        "frame": REFERENCE_FRAME,
        "sha256": sha256_bytes(canonical_json({"frame": REFERENCE_FRAME, "cameras": cameras})),
        "backend": headless_rendering(os.environ)["MUJOCO_GL"],
        **strings,
        "cameras": cameras,
        "seconds": round(time.perf_counter() - imported, 3),
        "import_s": round(imported - started, 3),
    }


def not_measured(error: str) -> dict[str, Any]:
    """The fingerprint of a stack whose reference frame could not be rendered."""
    return {"frame": REFERENCE_FRAME, "sha256": None,
            "backend": headless_rendering(os.environ)["MUJOCO_GL"],
            "vendor": None, "renderer": None, "version": None, "error": error}


def measure_in_child(context: SpawnContext | ForkServerContext | None = None,
                     timeout_s: float = MEASURE_TIMEOUT_S) -> dict[str, Any]:
    """:func:`measure` in a new process of ``context`` (default: spawn), so the caller
    never imports the simulator nor holds a GL context; ``wall_s`` is the whole cost. The
    process's output goes to a scratch log, and it leaves at once after answering: the EGL
    context's exit-time noise stays out."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pytest-libero-renderer-") as scratch:
        log = Path(scratch) / "measure.log"
        log.touch()
        answer = children.call(measure, timeout_s=timeout_s, context=context, output=log,
                               teardown=False)
        if isinstance(answer, children.Returned):
            found: dict[str, Any] = answer.value
        elif isinstance(answer, children.TimedOut):
            found = not_measured(f"no answer within {timeout_s:g} s; output ends:\n{tail_of(log, 10)}")
        elif isinstance(answer, children.Died):
            found = not_measured(f"the measuring process died (exit code {answer.exitcode}); "
                                 f"output ends:\n{tail_of(log, 10)}")
        else:
            found = not_measured(str(answer))
    found["wall_s"] = round(time.perf_counter() - started, 3)
    return found


# -- reading fingerprints back -------------------------------------------------------


def identity(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The part two renderers are compared by (what every record's identity holds);
    a failed measurement keeps its error."""
    kept = {key: fingerprint.get(key) for key in IDENTITY_KEYS}
    if fingerprint.get("error"):
        kept["error"] = fingerprint["error"]
    return kept


def fingerprint_problem(value: Any) -> str | None:
    """Why ``value`` cannot be read as a fingerprint (a record's ``identity.renderer``,
    run.json's ``renderer``), or None: a table holding every identity key, as text (or
    null, where the frame could not be rendered). One stored in another form is damage,
    never read as "written before fingerprints"."""
    if not isinstance(value, Mapping):
        return f"is a {'null' if value is None else type(value).__name__}"
    missing = [key for key in IDENTITY_KEYS if key not in value]
    if missing:
        return f"lacks {', '.join(missing)}"
    wrong = [key for key in (*IDENTITY_KEYS, "error") if key in value
             and not isinstance(value[key], str) and (value[key] is not None or key == "frame")]
    return f"holds {', '.join(wrong)} as other than text" if wrong else None


def measured(fingerprint: Mapping[str, Any] | None) -> bool:
    """Whether the reference frame was rendered (only then can it equal another)."""
    return fingerprint is not None and bool(fingerprint.get("sha256"))


def same(first: Mapping[str, Any] | None, second: Mapping[str, Any] | None) -> bool:
    """One renderer: both measured and every identity key equal."""
    return (measured(first) and measured(second) and first is not None and second is not None
            and all(first.get(k) == second.get(k) for k in IDENTITY_KEYS))


@cache
def _known() -> tuple[dict[str, Any], ...]:
    """The shipped known renderers; a damaged table is a usage error naming the file."""
    table = shipped_json(KNOWN_FILE, KNOWN_SCHEMA)
    with reading(KNOWN_FILE):
        for i, entry in enumerate(need(table, "renderers", list)):
            need(entry, "name", str, f"renderers[{i}].")
            for key in IDENTITY_KEYS:
                need(entry, key, (str, type(None)), f"renderers[{i}].")
        return tuple(table["renderers"])


def known_renderers() -> tuple[dict[str, Any], ...]:
    """The renderers this package has measured (``data/renderers.json``), read once."""
    return _known()


def known(fingerprint: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The shipped entry (``data/renderers.json``) this fingerprint matches, if any."""
    for entry in _known():
        if same(entry, fingerprint):
            return entry
    return None


GL_FAILURE = re.compile(r"\b(EGL|OSMesa|osmesa|GLFW|glfw|libGL|OpenGL|GL context)|'gl[A-Z]\w*'")
"""What the simulator's import or first render says when no GL context can be made: a
missing library or driver (PyOpenGL without its platform library has no ``glGetError``),
not a damaged scene."""
GL_FIX = {
    "egl": "libEGL with a driver for it (Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 "
           "libgl1-mesa-dri for CPU rendering; on a GPU, the NVIDIA driver's EGL)",
    "osmesa": "OSMesa (Debian/Ubuntu: apt-get install libosmesa6)",
    "glfw": "a display and GLFW's libraries (DISPLAY set, libglfw3, libgl1)",
}


def unusable(fingerprint: Mapping[str, Any]) -> str | None:
    """One line when the reference frame failed because this machine cannot make a GL
    context on the chosen backend (every case would error while rendering); else None."""
    error = str(fingerprint.get("error") or "")
    if measured(fingerprint) or not GL_FAILURE.search(error):
        return None
    backend = str(fingerprint.get("backend"))
    needs = GL_FIX.get(backend, f"the libraries MuJoCo's {backend} backend loads")
    return (f"MuJoCo cannot render with MUJOCO_GL={backend} here, so no case could run "
            f"({error.splitlines()[0][:300]}): install {needs}, or set MUJOCO_GL to a backend "
            "this machine has (egl, osmesa or glfw)")


def describe(fingerprint: Mapping[str, Any] | None) -> str:
    """A renderer in one line: what the GL stack said, the backend and the frame's hash
    (its first 12 digits), or why there is no fingerprint."""
    if fingerprint is None:
        return "not recorded (written before renderer fingerprints)"
    if not measured(fingerprint):
        error = str(fingerprint.get("error") or "no reference frame").splitlines()[0]
        return f"not measured ({error})"
    gl = ", ".join(str(fingerprint.get(k)) for k in ("renderer", "version"))
    return f"{gl} via {fingerprint.get('backend')}, frame {str(fingerprint['sha256'])[:12]}"


def standing(fingerprint: Mapping[str, Any] | None) -> str:
    """Which known renderer this is, or that the package has not measured it."""
    entry = known(fingerprint)
    if entry is not None:
        return f"known: {entry['name']}"
    if not measured(fingerprint):
        return "unknown: its images cannot be matched with any other run's"
    return ("not one this package has measured: its images may differ from runs on "
            "other renderers")
