"""Work LIBERO's set-up does that no case ever sees: skipped, or done once.

Building an environment and each native hard reset render camera images nobody reads:
every camera observable renders once to check its sensor (twice in a hard reset, which
makes new sensors and hands them to the old observables), and the reset renders its own
observation, which the case replaces (it installs the init state and settles first).
The build also opens a GL context for a simulation the first reset throws away, as does
each positioning reset in full mode. And every reset compiles the very scene the build
compiled: the XML is the same text (a task's build and resets give one XML, measured on
fast and full-mode cases of every suite). On llvmpipe these cost about 2 s of a fast case's 4.5 s set-up, and
1.5 s of each positioning reset.

None of it reaches a byte a case records. Rendering reads the simulation and writes
nothing into it, and draws nothing from any random stream (the render gates rely on
this too); MuJoCo compiles deterministically, and a copy of a compiled model is that
model (the same MJB bytes). So, for the thread that sets up and only while it does:

- :func:`unseen_renders` answers a camera render with a black frame of the asked size,
  and with ``context`` off gives a new simulation a stand-in offscreen context that
  holds the view options robosuite sets and cannot draw. The simulation a case keeps
  gets a real context, opened where robosuite opens it.
- :func:`compiled_once` compiles each scene once per block: a simulation the next reset
  throws away gets a copy, the one the case keeps the compiled model itself.

The observation tests compare the result with LIBERO's own loop bit for bit.

The switches are put into robosuite once per import of it and act only on a thread
inside one of the blocks; everywhere else robosuite runs as shipped.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np

_inside = threading.local()
"""This thread's blocks: ``renders`` unseen, ``no_context``, ``compiled`` (XML -> model)."""
_installing = threading.Lock()
_SWITCHED = "_pytest_libero_setup_work"
"""Marks the robosuite objects that hold the switches: a robosuite imported again (a
process that dropped it from ``sys.modules``, as pytester's in-process runs do) is
switched again, never left as shipped by a flag that outlived it."""


class _NoContext:
    """Stands in for the offscreen render context of a simulation that is never drawn."""

    offscreen = True

    def __init__(self, sim: Any, device_id: int = -1, **_: Any) -> None:
        import mujoco

        self.vopt = mujoco.MjvOption()
        sim.add_render_context(self)


def _black_frame(width: int | None = None, height: int | None = None, *, depth: bool = False,
                 **_: Any) -> Any:
    """What ``MjSim.render`` returns, all zeros: the rgb frame, with depth if asked."""
    rgb = np.zeros((height or 0, width or 0, 3), dtype=np.uint8)
    return (rgb, np.zeros((height or 0, width or 0), dtype=np.float32)) if depth else rgb


def _install() -> None:
    """Put the three switches into robosuite, each once per import of the module holding it."""
    import mujoco
    from robosuite.environments import base
    from robosuite.utils.binding_utils import MjSim

    with _installing:
        if not getattr(base, _SWITCHED, False):
            _switch_opener(base)
        if vars(MjSim).get(_SWITCHED):
            return
        render = MjSim.render
        compile_ = vars(MjSim)["from_xml_string"].__func__

        def switched_render(sim: MjSim, *args: Any, **kwargs: Any) -> Any:
            if getattr(_inside, "renders", False):
                return _black_frame(*args, **kwargs)
            return render(sim, *args, **kwargs)

        def switched_compile(cls: type[MjSim], xml: str) -> MjSim:
            compiled: dict[str, Any] | None = getattr(_inside, "compiled", None)
            if compiled is None:
                return compile_(cls, xml)
            model = compiled.get(xml)
            if model is None:
                model = compiled[xml] = mujoco.MjModel.from_xml_string(xml)
            if getattr(_inside, "no_context", False):  # thrown away by the next reset
                return cls(copy.copy(model))
            del compiled[xml]  # the case keeps this simulation: the compiled model itself
            return cls(model)

        MjSim.render = switched_render
        MjSim.from_xml_string = classmethod(switched_compile)
        setattr(MjSim, _SWITCHED, True)


def _switch_opener(base: Any) -> None:
    """Give robosuite's environments (module ``base``) the switched offscreen context."""
    opener = base.MjRenderContextOffscreen

    def switched_opener(sim: Any, *args: Any, **kwargs: Any) -> Any:
        chosen = _NoContext if getattr(_inside, "no_context", False) else opener
        return chosen(sim, *args, **kwargs)

    base.MjRenderContextOffscreen = switched_opener
    setattr(base, _SWITCHED, True)


@contextmanager
def _this_thread(**flags: Any) -> Iterator[None]:
    """Set this thread's ``flags`` for the block; the outer block's come back after it."""
    _install()
    saved = {name: getattr(_inside, name, None) for name in flags}
    for name, value in flags.items():
        setattr(_inside, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(_inside, name, value)


def unseen_renders(*, context: bool) -> AbstractContextManager[None]:
    """No camera renders inside, on this thread; ``context`` False: no GL context either."""
    return _this_thread(renders=True, no_context=not context)


def compiled_once() -> AbstractContextManager[None]:
    """Inside, on this thread, a scene compiled here before is copied, not compiled
    again; the simulation the case keeps (a real GL context) takes the model itself."""
    return _this_thread(compiled={})
