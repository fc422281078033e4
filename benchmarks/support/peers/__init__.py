"""One module per peer queue: its INCR task and a runner (``python -m peers.<name>``).

Each runs inside its own virtualenv under ``benchmarks/.venvs/`` (see peer_envs.py),
with this folder, benchmarks/support/, on its PYTHONPATH.
"""
