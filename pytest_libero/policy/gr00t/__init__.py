"""The GR00T family: NVIDIA Isaac-GR00T's own policy server, reached over ZeroMQ REQ/REP
(``transport = "gr00t"``, ``tcp://HOST:PORT``, docs/gr00t.md). Its wire is msgpack whose
numpy arrays travel in one of two generations' forms (np.save bytes or msgpack-numpy maps),
never pickle (``wire``); ``layout`` maps an observation to the request keys and the
reply's per-axis action keys to the (H, 7) chunk; ``client`` holds the REQ socket and the
policy over it (the only module that imports pyzmq); ``transport`` reads a gr00t profile
and runs its preflight.
"""
