"""vla-eval's model servers (allenai/vla-evaluation-harness): its websocket wire, protocol
version 1 (``transport = "vla-eval"``, ``ws://HOST:PORT``, docs/models.md). ``wire``
packs and reads its messages; ``payload`` lays an observation out as vla-eval's own
LIBERO benchmark does and maps the reply's action back; ``client`` holds the connection
and the policy over it; ``transport`` reads a vla-eval profile and runs its preflight.
"""
