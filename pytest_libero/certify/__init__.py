"""``pytest-libero check-server``: a policy server held to the contract without the simulator.

``golden`` loads the shipped golden observations (real first observations, pinned by
sha256); ``wire`` reaches a profile's server through its own transport, malformed
requests and dropped calls included; ``checks`` is the shipped test module, one pytest
case per check; ``plugin`` gives it the server and collects each verdict; ``certificate``
writes what was found; ``command`` is the command line and its exit codes.
"""
