"""What one PostgreSQL statement costs the calling process: `SELECT 1` on a blocking psycopg
connection (the app, the CLI) and on asyncio ones (the worker's activities: loop_worker/activity_ledger.py),
one connection and four at once. The CPU is this process's: what a worker spends a statement.

    .venv/bin/python bench/pg_statement.py postgresql://... [--statements 2000] [--repeats 3]

Prints µs of wall time and of CPU per statement (median of --repeats) for each way."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_result  # noqa: E402
from checkpoint_tui.ledger.backend import redact_url  # noqa: E402


def blocking(url: str, n: int) -> tuple[float, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            conn.execute("SELECT 1").fetchone()
        return (time.perf_counter() - wall) * 1e6 / n, (time.process_time() - cpu) * 1e6 / n


async def awaited(url: str, n: int, connections: int) -> tuple[float, float]:
    conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(connections)]

    async def some(conn, count: int) -> None:
        for _ in range(count):
            await (await conn.execute("SELECT 1")).fetchone()

    try:
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(some(c, n // connections) for c in conns))
        return (time.perf_counter() - wall) * 1e6 / n, (time.process_time() - cpu) * 1e6 / n
    finally:
        for conn in conns:
            await conn.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", help="a PostgreSQL URL (a password in it is never printed)")
    p.add_argument("--statements", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if args.statements < 4 or args.repeats < 1:
        p.error("--statements is a whole number >= 4 and --repeats >= 1")
    ways = {
        "blocking": lambda: blocking(args.url, args.statements),
        "asyncio x1": lambda: asyncio.run(awaited(args.url, args.statements, 1)),
        "asyncio x4": lambda: asyncio.run(awaited(args.url, args.statements, 4)),
    }
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in ways}
    for _ in range(args.repeats):  # interleaved, so machine noise hits each alike
        for name, way in ways.items():
            runs[name].append(way())
    print(f"{'way':<12} {'wall µs':>8} {'CPU µs':>8}")
    result = {}
    for name, values in runs.items():
        wall, cpu = statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)
        result[name] = {"wall_us": wall, "cpu_us": cpu}
        print(f"{name:<12} {wall:>8.0f} {cpu:>8.0f}")
    args.url = redact_url(args.url)
    print(f"wrote {write_result('pg_statement', {'args': vars(args), 'per_statement': result})}")


if __name__ == "__main__":
    main()
