"""The policy room. At the top, what every family shares: the contract (what a policy sees
and may answer), the faults every transport raises with their causes (``errors``), the
Transport interface and its registry (``transport``), the array checks every wire uses
(``arrays``) and the probe that asks a profile's transport whether its server is there
(``probe``). Each family has its own package: ``builtin`` (in-process, no wire),
``openpi`` (openpi's websocket protocol: codec, client, server) and ``gr00t`` (GR00T's
ZeroMQ server: wire, layout, client).
"""
