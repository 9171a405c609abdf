"""Every file the lab reads is bounded and every file it writes goes around planted links: a deep,
endless, huge or non-regular schedule or history is one line and exit 2 (a FAIL line of its own in
`replay --from DIR`, the other files still replayed) within 5 s and 200 MB; outputs are written by
temp + rename in a directory opened once, a named output that is a link is refused, and clean-up
removes only regular files the lab's manifest names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checkpoint_tui.errors import UsageError
from checkpoint_tui.files import (
    HISTORY_LIMIT,
    OutputDir,
    check_json_value,
    check_output_path,
    read_json_file,
    write_output,
)
from checkpoint_tui.files.inputs import MAX_ITEMS, SCHEDULE_LIMIT
from checkpoint_tui.files.outputs import MANIFEST
from checkpoint_tui.proof.chaos.schedule import make_schedule, save_schedule
from checkpoint_tui.proof.replay.histories import MAX_EVENTS
from replay_fixtures import good_history

DEEP = b"[" * 200_000
TIME_LIMIT_S = 5.0  # of CPU: what a file can make the command compute
# A block (a FIFO opened, a lock waited on) spends no CPU: the wall time may exceed three times the CPU
# time by at most this. Wide, because in `make test` four workers share two cores: a CLI start-up that
# takes 0.6 s alone has taken 5.6 s of wall time there, and the eight-history corpus 71 s for 19 s of
# CPU on a machine with two more busy processes.
WALL_LIMIT_S = 30.0
MEMORY_LIMIT_MB = 200
# The command under a wrapper that reports, on its last stderr line, the largest resident set of its
# children (the CLI and whatever it spawns) in KiB and their CPU seconds (user + system).
_MEASURE = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
    "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "print(u.ru_maxrss, u.ru_utime + u.ru_stime, file=sys.stderr); sys.exit(r.returncode)"
)


def cli_measured(tmp_path: Path, *args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float, float]:
    """(the result, CPU seconds, peak MB) of `checkpoint-tui --home HOME args...`, stderr without the
    figures; fails if the wall time passes 3 x the CPU time + WALL_LIMIT_S. CPU rather than wall time
    is what a hostile file can drive up, and it moves far less with what else runs on the machine."""
    argv = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "checkpoint_tui", "--home", str(tmp_path / "h")]
    started = time.monotonic()
    out = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - started
    *lines, figures = out.stderr.rstrip("\n").split("\n")
    out.stderr = "\n".join(lines) + ("\n" if lines else "")
    peak, cpu = figures.split()
    assert wall < 3 * float(cpu) + WALL_LIMIT_S, (args[-1:], wall, float(cpu))
    return out, float(cpu), int(peak) / 1024


def hostile(tmp_path: Path, kind: str) -> Path:
    """A hostile input file of one kind."""
    path = tmp_path / f"{kind}.json"
    if kind == "deep":
        path.write_bytes(DEEP)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "sparse":
        with path.open("wb") as fh:
            fh.truncate(200 * 1024 * 1024)  # 200 MB of holes: no disk, but a read would fill memory
    return path


KINDS = ["deep", "fifo", "zero", "directory", "sparse"]


def one_clean_line(out: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_schedule_is_exit_2_in_one_line(tmp_path, kind):
    path = hostile(tmp_path, kind)
    for flags in (["chaos", "--schedule", str(path)], ["chaos", "--shrink", str(path)]):
        out, took, peak = cli_measured(tmp_path, *flags)
        assert out.returncode == 2, out.stdout + out.stderr
        line = one_clean_line(out)
        assert str(path) in line and "schedule" in line
        assert took < TIME_LIMIT_S and peak < MEMORY_LIMIT_MB, (took, peak)
    assert not (tmp_path / "h" / "run" / "devserver.json").exists()  # nothing was started


def test_a_deep_schedule_under_a_users_worker_command_is_exit_2(tmp_path):
    path = hostile(tmp_path, "deep")
    out, took, peak = cli_measured(
        tmp_path,
        "--worker-cmd",
        f"{sys.executable} -c pass",
        "chaos",
        "--workflow",
        "SendLines",
        "--schedule",
        str(path),
    )
    assert out.returncode == 2 and "nests deeper than" in one_clean_line(out)
    assert took < TIME_LIMIT_S and peak < MEMORY_LIMIT_MB


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_history_named_alone_is_one_fail_line(tmp_path, kind):
    """`replay --from FILE` (not a folder of them): the file is read as a user's own name (a link to
    /dev/zero is followed, and refused as a device), each kind a FAIL line, in bounds."""
    path = hostile(tmp_path, kind)
    out, took, peak = cli_measured(tmp_path, "replay", "--from", str(path))
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    if kind == "directory":  # an empty folder: nothing to replay
        assert out.returncode == 2 and "no history files" in one_clean_line(out)
    else:
        assert out.returncode == 1, out.stdout + out.stderr
        (fail,) = [line for line in out.stdout.splitlines() if line.startswith("FAIL")]
        assert f"replay {kind}.json" in fail and (
            "nests deeper" in fail or "refusing to read" in fail or "over the limit" in fail
        ), fail
    assert took < TIME_LIMIT_S and peak < MEMORY_LIMIT_MB, (took, peak)


def test_a_corpus_of_hostile_files_alone_is_reported_within_5_s(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for kind in KINDS:
        hostile(corpus, kind)
    out, took, peak = cli_measured(tmp_path, "replay", "--from", str(corpus))
    assert out.returncode == 1 and "REPLAY FAILED — 4/4" in out.stdout, out.stdout + out.stderr
    assert took < TIME_LIMIT_S and peak < MEMORY_LIMIT_MB, (took, peak)


def wide(path: Path, unit: str, size: int, head: str = '{"events": [', tail: str = "]}") -> Path:
    """A JSON file of `size` bytes at most: `unit` repeated in a list. Small in bytes, large parsed."""
    path.write_text(head + ",".join([unit] * ((size - len(head) - len(tail)) // (len(unit) + 1))) + tail)
    return path


def test_a_schedule_that_would_parse_into_millions_of_objects_is_refused_unparsed(tmp_path):
    """Within the byte cap, `[{}, {}, ...]` is a million objects: parsed (and walked for depth) it took
    868 MB and 15 s as a 16 MiB file. Its values are counted before parsing instead."""
    path = wide(tmp_path / "wide.json", "{}", SCHEDULE_LIMIT)
    worker = ["--worker-cmd", f"{sys.executable} -c pass"]
    for flags in (
        ["chaos", "--schedule", str(path)],
        ["chaos", "--shrink", str(path)],
        [*worker, "chaos", "--workflow", "SendLines", "--schedule", str(path)],
    ):
        out, took, peak = cli_measured(tmp_path, *flags)
        assert out.returncode == 2 and f"holds over {MAX_ITEMS} JSON values" in one_clean_line(out), out.stderr
        assert took < TIME_LIMIT_S and peak < MEMORY_LIMIT_MB, (flags, took, peak)
    assert not (tmp_path / "h" / "run").exists()  # nothing was started


def heavy_history(path: Path, events: int, payloads: int, workflow_type: str = "AgentLoop") -> Path:
    """A history whose ids run 1, 2, 3, ... (so it gets as far as the replay child), each event after the
    first three an activity scheduled with `payloads` payloads: the most protobuf per JSON value."""
    evs = good_history(workflow_type)["events"][:3]
    payload = {"metadata": {"e": "", "f": ""}, "data": ""}
    evs += [
        {
            "eventId": str(k),
            "eventType": "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
            "activityTaskScheduledEventAttributes": {
                "activityId": str(k),
                "activityType": {"name": "a"},
                "input": {"payloads": [payload] * payloads},
            },
        }
        for k in range(4, events + 1)
    ]
    path.write_text(json.dumps({"events": evs}, separators=(",", ":")))
    return path


def test_the_costliest_files_within_the_caps_stay_in_bounds(tmp_path):
    """What the caps still let through, at its worst: a schedule and a history each at their byte cap,
    with MAX_ITEMS short strings and one long string holding an astral character (the parser's text,
    and that string, at 4 bytes a character); a history of MAX_EVENTS events of the costliest kind,
    replayed by the child. One more event than a file holds is a FAIL line before protobuf sees it."""
    from checkpoint_tui.files.inputs import HISTORY_LIMIT

    def at_cap(path: Path, cap: int) -> Path:
        head = '{"events": [' + ",".join(['"ab"'] * (MAX_ITEMS - 10)) + ', "'
        tail = '\U0001f600"]}'  # 7 bytes in UTF-8
        path.write_text(head + "a" * (cap - len(head) - 7) + tail)
        assert path.stat().st_size == cap
        return path

    cases = [
        (["chaos", "--schedule", str(at_cap(tmp_path / "s.json", SCHEDULE_LIMIT))], 2, "a schedule holds at most"),
        (["replay", "--from", str(at_cap(tmp_path / "h.json", HISTORY_LIMIT))], 1, "a history file holds at most"),
        (["replay", "--from", str(heavy_history(tmp_path / "run-x.01.json", MAX_EVENTS, 3))], 1, "core panicked"),
        (
            ["replay", "--from", str(heavy_history(tmp_path / "more.json", MAX_EVENTS + 1, 0))],
            1,
            f"{MAX_EVENTS + 1} events; a history file holds at most",
        ),
    ]
    for args, code, said in cases:
        out, took, peak = cli_measured(tmp_path, *args)
        assert out.returncode == code and said in out.stdout + out.stderr, (args[-1], out.stdout, out.stderr)
        assert "Traceback" not in out.stdout + out.stderr
        # the replay of 10,000 events by the child is the costliest: 2.8 s of CPU alone, 3.9 s beside
        # four busy loops (CPU time stretches on a contended VM too, if far less than wall time)
        slack = 5 if said == "core panicked" else 0
        assert took < TIME_LIMIT_S + slack and peak < MEMORY_LIMIT_MB, (args[-1], took, peak)
        print(f"\n{Path(args[-1]).name}: exit {code}, {took:.2f} s of CPU, {peak:.0f} MB")


def test_a_corpus_is_read_one_history_at_a_time(tmp_path):
    """Eight of the costliest histories a file may hold, of another workflow (skipped once read): each
    is let go before the next is read, so the corpus costs what one file costs."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for n in range(8):
        heavy_history(corpus / f"run-y.{n + 1:02d}.json", MAX_EVENTS, 3, workflow_type="SomeoneElses")
    out, took, peak = cli_measured(tmp_path, "replay", "--from", str(corpus), timeout=120)
    assert out.returncode == 0 and out.stdout.count("a history of workflow SomeoneElses") == 8, out.stdout
    assert peak < MEMORY_LIMIT_MB, peak
    print(f"\neight heavy histories: {took:.2f} s of CPU, {peak:.0f} MB")  # all eight held at once: 252 MB


def test_replay_from_a_directory_fails_each_hostile_file_and_replays_the_rest(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    files = [k for k in KINDS if k != "directory"]  # a directory named *.json is walked into, not read
    for kind in files:
        hostile(corpus, kind)
    (corpus / "wf-good.01.json").write_text(json.dumps(good_history("AgentLoop")))
    out, took, peak = cli_measured(tmp_path, "replay", "--from", str(corpus))
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    fails = [line for line in out.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 5, out.stdout  # four hostile files, and the good one (AgentLoop does not end at once)
    for kind in files:
        assert any(f"replay {kind}.json" in line for line in fails), kind
    assert any("replay wf-good.01" in line and "events" in line for line in fails), out.stdout  # it was replayed
    assert "REPLAY FAILED — 5/5" in out.stdout
    assert took < TIME_LIMIT_S + 5 and peak < MEMORY_LIMIT_MB, (took, peak)  # + the replay child's start-up


def test_read_json_file_bounds(tmp_path):
    with pytest.raises(UsageError, match="nests deeper than"):
        read_json_file(hostile(tmp_path, "deep"), "the history", HISTORY_LIMIT)
    shallow_but_deep = tmp_path / "seventy.json"
    shallow_but_deep.write_text("[" * 70 + "]" * 70)  # under the parser's own limit, over ours
    with pytest.raises(UsageError, match="nests deeper than 64"):
        read_json_file(shallow_but_deep, "the history", HISTORY_LIMIT)
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 100 + "0]")
    with pytest.raises(UsageError, match="over the limit of 100"):
        read_json_file(big, "the history", 100)
    link = tmp_path / "link.json"
    link.symlink_to(big)
    assert len(read_json_file(link, "the history", HISTORY_LIMIT)) == 101  # a name a user typed may be a link
    with pytest.raises(UsageError, match="symbolic link"):
        read_json_file(link, "the history", HISTORY_LIMIT, follow=False)  # one found in a directory may not


def test_check_json_value_refuses_what_temporal_cannot_take():
    deep: list = []
    for _ in range(985):
        deep = [deep]
    with pytest.raises(UsageError, match="--input nests deeper than 64"):
        check_json_value(deep, "--input")
    with pytest.raises(UsageError, match="NaN or Infinity"):
        check_json_value({"a": [float("nan")]}, "--input")
    with pytest.raises(UsageError, match="cannot be encoded"):
        check_json_value({"a": object()}, "--input")
    check_json_value({"count": 3, "lines": ["a", {"b": None}]}, "--input")


def test_outputs_are_never_written_through_a_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    with pytest.raises(UsageError, match="symbolic link"):
        write_output(link, "{}", "--json")
    for bad in (tmp_path, Path("/dev/null")):
        with pytest.raises(UsageError):
            check_output_path(bad, "--json")
    directory = tmp_path / "bundle"
    with OutputDir(directory, "the proof bundle") as out:
        (directory / "report.json").symlink_to(victim)  # planted after the directory was opened
        out.write("report.json", "{}")
        (directory / "histories").symlink_to(tmp_path)
        with pytest.raises(UsageError, match="symbolic link"):
            out.subdir("histories")
    assert victim.read_text() == "precious" and (directory / "report.json").read_text() == "{}"
    assert not (directory / "report.json").is_symlink()


def test_clean_up_removes_only_regular_files_the_manifest_names(tmp_path):
    victim_dir = tmp_path / "elsewhere"
    victim_dir.mkdir()
    (victim_dir / "a.json").write_text("keep")
    directory = tmp_path / "bundle"
    with OutputDir(directory, "the proof bundle") as out:
        hist = out.subdir("histories")
        hist.write("a.json", "1")
        hist.write("b.json", "2")
        out.write("kill-1.svg", "<svg/>")
        out.replace_manifest()
    (directory / "histories" / "b.json").unlink()
    (directory / "histories" / "b.json").symlink_to(victim_dir / "a.json")  # planted where the lab wrote
    (directory / "mine.json").write_text("the user's own file")
    with OutputDir(directory, "the proof bundle") as out:
        removed = out.replace_manifest()  # this time nothing is written again
    assert sorted(removed) == ["histories/a.json", "kill-1.svg"]
    assert (directory / "histories" / "b.json").is_symlink() and (victim_dir / "a.json").read_text() == "keep"
    assert (directory / "mine.json").exists()
    assert json.loads((directory / MANIFEST).read_text()) == []


def test_output_flags_are_checked_before_anything_runs(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    schedule = tmp_path / "s.json"
    save_schedule(schedule, make_schedule(1, 12, 4), 12, 1)
    (tmp_path / "s.min.json").symlink_to(victim)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "histories").symlink_to(tmp_path)  # inside --proof DIR: refused now, not after the run (#39)
    cases = [
        ["--verify", "--proof", str(bundle)],
        ["chaos", "--proof", str(bundle)],
        ["chaos", "--json", str(tmp_path)],  # a directory: the report would be lost after the run
        ["chaos", "--json", str(link)],
        ["--verify", "--json", str(link)],
        ["chaos", "--junit", str(link)],
        ["chaos", "--save-schedule", str(link)],
        ["chaos", "--proof", str(link)],
        ["replay", "--from", str(schedule), "--export", str(link)],
        ["chaos", "--shrink", str(schedule)],  # s.min.json is the link
        ["--stats", str(link)],  # the app's per-refresh figures (bench/tui_tick.py), appended to for hours
    ]
    for args in cases:
        out, took, _ = cli_measured(tmp_path, *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        line = one_clean_line(out)
        assert "symbolic link" in line or "directory" in line, (args, line)
        assert took < TIME_LIMIT_S
    assert victim.read_text() == "precious"
    assert not (tmp_path / "h" / "run" / "devserver.json").exists()


def test_replay_export_replaces_a_planted_link_instead_of_following_it(tmp_path):
    corpus, export = tmp_path / "corpus", tmp_path / "export"
    corpus.mkdir()
    export.mkdir()
    (corpus / "wf-good.01.json").write_text(json.dumps(good_history("AgentLoop")))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (export / "wf-good.01.json").symlink_to(victim)
    out, _, _ = cli_measured(tmp_path, "replay", "--from", str(corpus), "--export", str(export))
    assert "exported 1 histories" in out.stdout and "Traceback" not in out.stderr, out.stderr
    assert victim.read_text() == "precious" and not (export / "wf-good.01.json").is_symlink()
    (export / "wf-good.01.json").unlink()
    (export / "wf-good.01.json").symlink_to(tmp_path / "nowhere")  # dangling
    out, _, _ = cli_measured(tmp_path, "replay", "--from", str(corpus), "--export", str(export))
    assert "exported 1 histories" in out.stdout and "Traceback" not in out.stderr, out.stderr
