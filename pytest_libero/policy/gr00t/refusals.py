"""What a GR00T server's ``{"error": ...}`` says was wrong, so the message can name it.

GR00T's policies check both sides of a call in strict mode (``run_gr00t_server.py``'s
default): the observation before the model runs, the model's actions after. Their texts
(upstream's own words) tell the cases apart:

* ``Action key 'x's horizon must be 16. Got 4``: the *reply* failed the server's output
  check; the request was fine, the checkpoint answers what its modality config does
  not describe;
* ``Observation must contain a 'video' key``: the server was started without
  ``--use-sim-policy-wrapper`` and wants nested observations, not the flat
  ``video.*``/``state.*`` keys GR00T's LIBERO loop (and the profile) sends;
* ``Video key 'image' must be a numpy array. Got <class 'dict'>``: our arrays reached the
  model undecoded, sent in the form the other wire generation reads;
* anything else: the server refused the request.
"""

from __future__ import annotations

import re
from enum import Enum

from pytest_libero.policy.gr00t.wire import Wire

OUTPUT_CHECK = re.compile(r"Action key '[^']*'")
"""The start of every failure of GR00T's output check (``check_action``)."""
NO_SIM_WRAPPER = "Observation must contain a 'video' key"
"""Gr00tPolicy's input check on a flat observation: no sim-policy wrapper in front."""
UNDECODED = "<class 'dict'>"
"""An array that reached the model as the other generation's map."""


class Refused(Enum):
    """What a server's error text says it refused."""

    REQUEST = "request"
    REPLY = "reply"
    UNWRAPPED = "unwrapped"


def refused(text: str) -> Refused:
    if OUTPUT_CHECK.match(text.strip()):
        return Refused.REPLY
    if NO_SIM_WRAPPER in text:
        return Refused.UNWRAPPED
    return Refused.REQUEST


def hint(text: str, wire: Wire) -> str:
    """A parenthesised hint for a case's error, or "" when the text speaks for itself."""
    kind = refused(text)
    if kind is Refused.REPLY:
        return (" (the server's output check refused its own model's reply, not the request: "
                "the checkpoint answers actions its modality config does not describe)")
    if kind is Refused.UNWRAPPED:
        return (" (the server was started without the sim-policy wrapper and wants nested "
                "observations; restart it with --use-sim-policy-wrapper)")
    if UNDECODED in text:
        other = Wire.MSGPACK_NUMPY if wire is Wire.NPY else Wire.NPY
        return (f" (the request sent its arrays in the {wire} form; a server that reads only "
                f"the {other} form sees them as dicts: set policy.wire = \"{other}\" or "
                "\"auto\" in the profile)")
    return ""
