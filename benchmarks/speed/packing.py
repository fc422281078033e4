"""What packing one command costs: redis-py's packers beside ``store/resp.py``'s.

A dispatch packs its ``push.lua`` call (the script's sha, its keys and arguments) before
the push can leave, and a worker child packs each reserve and ack call. This times the
packing alone, in this process, for the call a plain dispatch of ``bench_tasks.empty``
makes (its arguments as ``RedisQueue.push`` passes them to the wire): redis-py's
``Connection.pack_command`` with its Python packer and, if hiredis is installed, with
hiredis's (which redis-py picks when it is); and ``resp.pack``. Best of ``--repeat``
runs of ``--number`` packs each; the bytes are checked to be the same.

    python benchmarks/speed/packing.py
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
from common import table
from redis.connection import Connection, PythonRespSerializer

from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store import resp
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.store.wire import Wire


def push_call(url: str) -> tuple[resp.KeyOrArg, ...]:
    """The arguments of the wire call a plain dispatch makes, as it makes them."""
    sent: list[tuple[resp.KeyOrArg, ...]] = []
    send = Wire.send

    def recording(wire: Wire, *args: resp.KeyOrArg, reuse: bool = False) -> object:
        sent.append(args)
        return send(wire, *args, reuse=reuse)

    use(RedisQueue(Config.resolve(redis_url=url)))
    Wire.send = recording  # type: ignore[method-assign]
    try:
        bench_tasks.empty.dispatch()
    finally:
        Wire.send = send  # type: ignore[method-assign]
    return sent[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=100_000, help="packs per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the best is shown")
    args = parser.parse_args()
    for name in ("number", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    with RedisServer() as server:
        command = push_call(server.url)
    connection = Connection()  # packs without connecting
    python_packer = PythonRespSerializer(6000, connection.encoder.encode)
    packers = {"redis-py, its Python packer": lambda: python_packer.pack(*command)}
    if importlib.util.find_spec("hiredis") is not None:
        packers["redis-py, with hiredis (its default then)"] = lambda: connection.pack_command(
            *command
        )
    packers["resp.pack"] = lambda: resp.pack(command)
    expected = resp.pack(command)
    rows = []
    for name, packer in packers.items():
        packed = packer()
        assert (packed if isinstance(packed, bytes) else b"".join(packed)) == expected, name
        best = min(timeit.repeat(packer, number=args.number, repeat=args.repeat))
        rows.append((name, f"{best / args.number * 1e6:.2f}"))
    table(
        ("packer", "µs per command"),
        rows,
        f"One dispatch's push.lua call ({len(command)} arguments, {len(expected)} bytes "
        f"packed), best of {args.repeat} runs of {args.number:,}",
    )


if __name__ == "__main__":
    main()
