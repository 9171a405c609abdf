"""Helpers shared by the benchmark scripts (not part of the package)."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

import psutil

from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = Path(os.environ.get("CHECKPOINT_BENCH_DIR") or ROOT / "run" / "bench")


def bench_home(name: str, address: str | None, ledger_url: str | None = None) -> Settings:
    home = Settings(home=OUT_DIR / name, temporal_address=address, ledger_url=ledger_url)
    home.ensure_dirs()
    return home


async def connect(home: Settings):
    address, _ = resolve_address(home)
    return address, await connect_client(home, address)


def summary(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(values), "min": min(values), "median": statistics.median(values), "max": max(values)}


def machine() -> dict:
    return {
        "cores": psutil.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }


def write_result(name: str, data: dict) -> Path:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{name}.json"
    path.write_text(json.dumps({**data, "machine": machine()}, indent=2))
    return path
