"""The openpi family: policy servers that speak openpi's websocket protocol
(``transport = "websocket"``, ``ws://HOST:PORT``), openpi's own and ours alike. The wire
is openpi's: one msgpack metadata frame on connect, then one binary msgpack request and
one reply per call, a text frame with the traceback when the policy raises, and
``GET /healthz`` on the same port (``codec`` writes and reads the messages, ``layout``
names the request keys). ``client`` is the synchronous websocket client, ``transport``
the policy over it and the profile's transport, ``launcher`` starts a profile's server
for the session; ``server`` is our server speaking the same protocol, behind
``python -m pytest_libero.serve``.
"""
