"""What Textual's input thread costs an idle app: a minimal app (one Static) in tmux, its input thread's
CPU and wake-ups (voluntary context switches) per second, and the whole process's, over --seconds.

    .venv/bin/python bench/textual_idle_input.py [--seconds 30] [--repeats 3]

Drivers, in turn in each repeat: `stock` (Textual's LinuxDriver) and `patched` (Textual's own
linux_driver.py with docs/textual-input-thread.diff applied, loaded from a temporary copy: the change
proposed upstream in docs/upstream-textual-input-thread.md). Only Textual and tmux are needed."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIFF = ROOT / "docs" / "textual-input-thread.diff"
DRIVERS = ("stock", "patched")


def driver_class(mode: str, patched_dir: Path | None) -> type:
    if mode == "stock":
        from textual.drivers.linux_driver import LinuxDriver

        return LinuxDriver
    assert patched_dir is not None
    spec = importlib.util.spec_from_file_location("patched_linux_driver", patched_dir / "linux_driver.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.LinuxDriver


def child(mode: str, patched_dir: Path | None, tid_file: Path) -> None:
    """The minimal app; once mounted it writes its input thread's native id, and on a lone Escape the
    time it saw it (beside that file, `.esc`)."""
    from textual.app import App, ComposeResult
    from textual.widgets import Static

    driver = driver_class(mode, patched_dir)

    class Idle(App):
        BINDINGS = [("escape", "seen_escape", "")]

        def action_seen_escape(self) -> None:
            tid_file.with_suffix(".esc").write_text(repr(time.time()))

        def compose(self) -> ComposeResult:
            yield Static(f"idle, {mode} driver")

        def get_driver_class(self):
            return driver

        def on_mount(self) -> None:
            self.set_timer(0.5, self.note_thread)

        def note_thread(self) -> None:
            ids = [t.native_id for t in threading.enumerate() if t.name == "textual-input"]
            tid_file.write_text(str(ids[0]) if ids else "")

    Idle().run()


def patch_textual(into: Path) -> Path:
    """A copy of the installed Textual's linux_driver.py with the proposed diff applied."""
    import textual.drivers.linux_driver as upstream

    target = into / "linux_driver.py"
    shutil.copy(upstream.__file__, target)
    subprocess.run(["patch", "--quiet", str(target), str(DIFF)], check=True)
    return into


def task_counts(pid: int, tid: int) -> tuple[float, int]:
    """CPU seconds and voluntary context switches of one thread (tid) or, with tid == pid summed over
    its threads, of the whole process. CPU from schedstat (nanoseconds on a CPU): the clock ticks of
    /proc/PID/stat (10 ms) cannot see a wake-up of ~0.05 ms."""
    tids = [tid] if tid != pid else [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    cpu, switches = 0.0, 0
    for t in tids:
        try:
            cpu += int(Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0]) / 1e9
            for line in Path(f"/proc/{pid}/task/{t}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    switches += int(line.split()[1])
        except OSError:  # a thread that ended
            continue
    return cpu, switches


def measure(mode: str, patched_dir: Path, seconds: float, work: Path) -> dict:
    tid_file = work / f"tid-{mode}"
    tid_file.unlink(missing_ok=True)
    name = f"idle-input-{mode}-{os.getpid()}"
    cmd = f"exec {sys.executable} {Path(__file__).resolve()} --child {mode} --patched-dir {patched_dir}"
    cmd += f" --tid-file {tid_file}"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "100", "-y", "30", cmd], check=True)
    try:
        pid = int(
            subprocess.run(
                ["tmux", "display", "-p", "-t", name, "#{pane_pid}"], capture_output=True, text=True, check=True
            ).stdout
        )
        deadline = time.monotonic() + 60
        while not (tid_file.exists() and tid_file.read_text()):
            if time.monotonic() > deadline:
                raise SystemExit(f"the {mode} app did not start (no input thread seen)")
            time.sleep(0.1)
        tid = int(tid_file.read_text())
        time.sleep(2.0)  # settle
        before = task_counts(pid, tid), task_counts(pid, pid), time.monotonic()
        time.sleep(seconds)
        after = task_counts(pid, tid), task_counts(pid, pid), time.monotonic()
        esc_s = lone_escape(name, tid_file.with_suffix(".esc"))
        subprocess.run(["tmux", "send-keys", "-t", name, "C-q"], check=True)  # Textual's quit key
        asked, deadline = time.monotonic(), time.monotonic() + 30
        while subprocess.run(["tmux", "has-session", "-t", name], capture_output=True).returncode == 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"the {mode} app did not quit on ctrl+q in 30 s")
            time.sleep(0.01)
        quit_s = time.monotonic() - asked
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    span = after[2] - before[2]
    return {
        "thread_cpu_pct": 100 * (after[0][0] - before[0][0]) / span,
        "thread_wakeups_per_s": (after[0][1] - before[0][1]) / span,
        "process_cpu_pct": 100 * (after[1][0] - before[1][0]) / span,
        "process_wakeups_per_s": (after[1][1] - before[1][1]) / span,
        "escape_s": esc_s,  # a lone Escape, sent to the app seen: the parser's timeout (0.1 s), not longer
        "quit_s": quit_s,  # ctrl+q to the app gone: the exit must wake a thread that waits for input
    }


def lone_escape(name: str, seen: Path) -> float:
    """Seconds from sending a lone Escape to the app's binding seeing it."""
    seen.unlink(missing_ok=True)
    sent = time.time()
    subprocess.run(["tmux", "send-keys", "-t", name, "Escape"], check=True)
    deadline = time.monotonic() + 30
    while not (seen.exists() and seen.read_text()):
        if time.monotonic() > deadline:
            raise SystemExit("a lone Escape was not seen in 30 s")
        time.sleep(0.01)
    return float(seen.read_text()) - sent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--child", choices=DRIVERS, help=argparse.SUPPRESS)
    p.add_argument("--patched-dir", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--tid-file", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.patched_dir, args.tid_file)
        return
    if shutil.which("tmux") is None or shutil.which("patch") is None:
        raise SystemExit("needs tmux and patch")
    with tempfile.TemporaryDirectory(prefix="textual-idle-input-") as tmp:
        work = Path(tmp)
        patched = patch_textual(work)
        results: dict[str, list[dict]] = {mode: [] for mode in DRIVERS}
        for _ in range(args.repeats):
            for mode in DRIVERS:
                results[mode].append(measure(mode, patched, args.seconds, work))
    print(f"idle {args.seconds:.0f} s, median of {args.repeats}: input thread / whole process")
    print(
        f"{'driver':<8} {'thread CPU %':>13} {'thread wake/s':>14} {'process CPU %':>14} {'process wake/s':>15}"
        f" {'Esc s':>6} {'quit s':>7}"
    )
    for mode, rs in results.items():
        m = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(
            f"{mode:<8} {m['thread_cpu_pct']:>13.3f} {m['thread_wakeups_per_s']:>14.1f}"
            f" {m['process_cpu_pct']:>14.3f} {m['process_wakeups_per_s']:>15.1f}"
            f" {m['escape_s']:>6.2f} {m['quit_s']:>7.2f}"
        )


if __name__ == "__main__":
    main()
