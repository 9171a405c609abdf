"""The verdict read where a user's effects land (#48): `--effects SPEC` parsed and read (files, folders,
SQLite, PostgreSQL; hostile and broken destinations one line and exit 2, nothing written), what a run
added and which ids it added twice, which tool calls made them, and a real chaos run of the blind
pydantic-ai mailer whose outbox is named."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from itertools import count

import pytest

from checkpoint_tui.core.activity_history import ActivityExec
from checkpoint_tui.core.destination_audit import assign, callers, diff
from checkpoint_tui.frameworks import UnitInfo
from checkpoint_tui.ledger.destination import DestinationError, parse_destination, read_ids
from conftest import run_cli
from test_agents_lab import TURNS, lab, sent
from test_user_workflow_lab import stop_lab

_homes = count()


def test_file_lines_are_ids_and_a_regex_group_names_them(tmp_path):
    out = tmp_path / "outbox.txt"
    out.write_text("a 1\nb 2\na 1\n\nnoise\n")
    assert read_ids(parse_destination(f"file:{out}")) == Counter({"a 1": 2, "b 2": 1, "noise": 1})
    by_group = parse_destination(rf"file:{out}:^(\w) \d")
    assert by_group.pattern == r"^(\w) \d" and read_ids(by_group) == Counter({"a": 2, "b": 1})


def test_a_folder_is_its_regular_files_and_a_missing_outbox_is_empty(tmp_path):
    (tmp_path / "one.txt").write_text("x\n")
    (tmp_path / "two.txt").write_text("x\ny\n")
    (tmp_path / "sub").mkdir()
    assert read_ids(parse_destination(f"file:{tmp_path}")) == Counter({"x": 2, "y": 1})
    assert read_ids(parse_destination(f"file:{tmp_path}/not-yet.txt")) == Counter()  # the first effect makes it


@pytest.mark.parametrize(
    "case",
    [
        "no folder",
        "link",
        "link inside",
        "fifo",
        "no group",
        "bad regex",
        "scheme",
        "password",
        "no query",
        "two statements",
        "not sqlite",
        "password echo",
        "password keywords",
    ],
)
def test_a_bad_destination_is_one_line(tmp_path, case):
    (tmp_path / "real.txt").write_text("x\n")
    spec = {
        "no folder": f"file:{tmp_path}/nowhere/out.txt",
        "link": f"file:{tmp_path}/link.txt",
        "link inside": f"file:{tmp_path}",
        "fifo": f"file:{tmp_path}/fifo",
        "no group": f"file:{tmp_path}/real.txt:^x",
        "bad regex": f"file:{tmp_path}/real.txt:(",
        "scheme": "ftp:somewhere",
        "password": "sql:postgresql://u:secret@127.0.0.1:5/db:SELECT 1",
        "no query": f"sql:sqlite:{tmp_path}/db.sqlite",
        "two statements": f"sql:sqlite:{tmp_path}/db.sqlite:SELECT 1; DROP TABLE t",
        "not sqlite": f"sql:{tmp_path}/real.txt:SELECT 1",
        "password echo": "postgresql://u:secret@h/db",
        "password keywords": "sql:host=h password=secret dbname=x:SELECT id FROM t",
    }[case]
    if case in ("link", "link inside"):
        (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    if case == "fifo":
        os.mkfifo(tmp_path / "fifo")
    with pytest.raises(DestinationError) as err:
        read_ids(parse_destination(spec))
    assert "\n" not in str(err.value) and "secret" not in str(err.value)


def test_a_regex_may_hold_a_colon_and_a_wal_database_is_read_from_a_copy(tmp_path):
    out = tmp_path / "out.log"
    out.write_text("ts=1:abc\nts=2:abc\n")
    spec = parse_destination(rf"file:{out}:ts=\d+:(\w+)")
    assert spec.target == str(out) and read_ids(spec) == Counter({"abc": 2})
    db = tmp_path / "w.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (id TEXT)")
    conn.execute("INSERT INTO t VALUES ('a'), ('a')")
    conn.commit()
    conn.close()  # checkpointed and its -wal removed at close
    names = sorted(p.name for p in tmp_path.iterdir())
    assert read_ids(parse_destination(f"sql:sqlite:{db}:SELECT id FROM t")) == Counter({"a": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == names  # no -wal, no -shm left beside it


def test_sqlite_is_read_with_the_users_query_and_never_written(tmp_path, monkeypatch):
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE effects (id TEXT, body TEXT)")
        conn.executemany("INSERT INTO effects VALUES (?, ?)", [("e1", "x"), ("e2", "y"), ("e1", "x")])
    before = db.read_bytes()
    spec = parse_destination(f"sql:sqlite:{db}:SELECT id FROM effects")
    assert read_ids(spec) == Counter({"e1": 2, "e2": 1})
    writes = parse_destination(f"sql:sqlite:{db}:WITH x AS (SELECT 1) DELETE FROM effects")
    with pytest.raises(DestinationError, match="the query failed"):
        read_ids(writes)
    with pytest.raises(DestinationError, match="the query failed"):
        read_ids(parse_destination(f"sql:sqlite:{db}:SELECT nope FROM effects"))
    monkeypatch.setattr("checkpoint_tui.ledger.destination.QUERY_TIMEOUT_S", 0.3)
    forever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n WHERE i < 0"
    with pytest.raises(DestinationError, match="took over"):
        read_ids(parse_destination(f"sql:sqlite:{db}:{forever}"))
    assert db.read_bytes() == before and not (tmp_path / "app.db-wal").exists()


def test_postgresql_is_read_read_only(pg_url):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE sent (id text)")
        conn.execute("INSERT INTO sent VALUES ('m1'), ('m2'), ('m2')")
    url = pg_url  # the test server trusts loopback: no password (one in the URL is refused above)
    assert read_ids(parse_destination(f"sql:{url}:SELECT id FROM sent")) == Counter({"m1": 1, "m2": 2})
    with pytest.raises(DestinationError, match="the query failed"):  # wrapped, then read-only: never runs
        read_ids(parse_destination(f"sql:{url}:WITH d AS (DELETE FROM sent RETURNING id) SELECT id FROM d"))
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM sent").fetchone() == (3,)


def test_what_a_run_added_twice_is_a_duplicate_and_what_was_there_is_not():
    before = Counter({"old-twice": 2, "old-once": 1})
    after = Counter({"old-twice": 2, "old-once": 2, "new": 1, "new-twice": 3})
    d = diff("file:x", before, after)
    assert d.new == 1 + 1 + 3 and d.extra == 2  # the seed's COUNT(*) - COUNT(DISTINCT id), for what the run added
    assert [k for k, _, _ in d.duplicates] == ["new-twice"] and d.again == ["old-once"]  # there before: not the run's


def _call(seq: int, body: str, attempt: int = 1) -> ActivityExec:
    act = ActivityExec(seq, 0, "e", str(seq), "send_email", 0.0, attempt=attempt, status="completed")
    act.args = [{"tool_name": "send_email", "args": json.dumps({"to": "ops@example.com", "body": body})}]
    act.info = UnitInfo("tool", "send_email", f"call-{seq}", None, None, None, "tool · send_email")
    return act


def test_a_duplicate_is_named_with_the_tool_call_whose_arguments_it_holds():
    calls = [_call(1, "turn 1"), _call(2, "turn 10", attempt=2), _call(3, "turn 11")]
    assert callers("wf ops@example.com turn 10", calls) == [calls[1]]  # not turn 1, a prefix of it
    assert callers("wf ops@example.com turn 11", calls) == [calls[2]]
    assert callers("unrelated", calls) == []
    d = diff("file:x", Counter(), Counter({"wf ops@example.com turn 10": 2, "zzz": 2}))
    owned = assign([d], {"r1": calls, "r2": []}, lead="r1")
    assert [x["calls"] for x in owned["r1"]] == [["send_email call call-2"], []] and owned["r2"] == []


def test_a_call_whose_effect_never_reached_the_destination_stays_at_risk():
    from checkpoint_tui.core.activity_audit import ActivityAudit
    from checkpoint_tui.core.activity_audit import apply_destinations as apply

    calls = [_call(1, "turn 1", attempt=2), _call(2, "turn 2", attempt=2)]
    risky = [{"activity_id": "1", "seq": 1}, {"activity_id": "2", "seq": 2}]
    audit = ActivityAudit("r", "W", "COMPLETED", 2, 2, at_risk=list(risky))
    landed = diff("file:x", Counter(), Counter({"wf ops@example.com turn 1": 1}))  # only turn 1's email
    apply(audit, [landed], [], calls)
    assert [r["activity_id"] for r in audit.effect_once] == ["1"] and audit.at_risk == [risky[1]]
    assert not audit.ok  # a destination named wrong, or another place, proves nothing
    failed = diff("file:x", Counter(), Counter())
    failed.error = "--effects file:x: over 1000000 effects"
    audit = ActivityAudit("r", "W", "COMPLETED", 2, 2, at_risk=list(risky))
    apply(audit, [failed], [], calls)
    assert audit.at_risk == risky and audit.destinations[0]["error"]


def test_effects_is_refused_without_a_worker_of_yours_and_a_bad_one_before_anything_starts(tmp_path):
    out = run_cli("--home", str(tmp_path / "h"), "--effects", f"file:{tmp_path}/o.txt", "chaos", "--seed", "1")
    assert out.returncode == 2 and "--worker-cmd" in out.stderr
    out = run_cli("--home", str(tmp_path / "h"), "--effects", "nope:x", "status")
    assert out.returncode == 2 and "file:PATH" in out.stderr
    out = run_cli("--home", str(tmp_path / "h"), "--worker-cmd", "true", "--effects", "http:MAIL:id", "status")
    assert out.returncode == 2 and "--dependency MAIL=HOST:PORT" in out.stderr, out.stderr
    home = tmp_path / "h2"
    out = run_cli(
        "--home",
        str(home),
        "--worker-cmd",
        "true",
        "--effects",
        f"file:{tmp_path}/none/o.txt",
        "chaos",
        "--workflow",
        "W",
        "--seed",
        "1",
    )
    assert out.returncode == 2 and "no folder" in out.stderr, out.stderr
    assert not (home / "run" / "temporal.pid").exists() and not list((home / "run").glob("*.log"))


def test_a_blind_agent_is_judged_at_its_outbox(session_root, temporal_address):
    """The blind pydantic-ai mailer with its outbox named: it is shown duplicating (DUPLICATED = the outbox's
    extra lines, each named with its call), no call is left 'at risk', each re-executed call is either the
    maker of a line the outbox holds twice or 'effect once'."""
    home = session_root / f"dest-blind-{next(_homes)}"
    report_path = home / "chaos.json"
    try:
        out = run_cli(
            *lab("pydantic-ai", home, address=temporal_address),
            "--effects",
            f"file:{home}/example-out",
            "chaos",
            "--workflow",
            "PydanticMailer",
            "--input",
            json.dumps({"turns": TURNS, "pace": 0.3}),
            "--seed",
            "3",
            "--kills",
            "3",
            "--aim",
            "tool",
            "--json",
            str(report_path),
            timeout=240,
        )
        report = json.loads(report_path.read_text())
        status = run_cli(
            *lab("pydantic-ai", home, address=temporal_address), "status", timeout=60
        )  # the same reading, read back
    finally:
        stop_lab(home)
    audit = report["audit"]
    assert audit["verdict"] in status.stdout and "DUPLICATED at file:" in status.stdout, status.stdout[-2000:]
    lines = sent(home, report["run_id"])
    extra = sum(n - 1 for n in lines.values())
    assert audit["at_risk"] == [] and audit["duplicated"] == extra, (audit["duplicated_detail"], lines)
    # the seeded claim-window kill is the hop's crash point after the tool's effect: certain to duplicate
    assert extra >= 1 and out.returncode == 1, out.stdout[-3000:]
    named = {a for d in audit["destination_duplicates"] for a in d["activity_ids"]}
    reran = {r["activity_id"] for r in audit["re_executed"] if r["class"] == "tool"}
    assert reran == named | {r["activity_id"] for r in audit["effect_once"]}
    dups = audit["destination_duplicates"]
    assert all(d["calls"] and d["calls"][0].startswith("send_email call pyd_ai_") for d in dups)
    assert audit["destinations"] == [
        {"label": f"file:{home}/example-out", "new": sum(lines.values()), "duplicates": extra, "again": 0}
    ]


def test_an_event_after_the_run_closed_is_not_a_kill_and_nothing_exercised_is_not_a_pass(
    session_root, temporal_address
):
    """A one-line workflow and a kill 1.5 s after its only activity closed: the run is over by then.
    The kill is not fired (said why), no window counts it, and the run says NOT EXERCISED (exit 1)
    unless --allow-unexercised accepts it."""
    from test_user_workflow_lab import lab_flags

    home = session_root / f"dest-closed-{next(_homes)}"
    home.mkdir(parents=True)
    schedule = home / "s.json"
    schedule.write_text(
        json.dumps(
            {
                "steps": 2,
                "events": [
                    {"at_step": 1, "nemesis": "worker-between-activities", "target": "worker", "delay_ms": 1500}
                ],
            }
        )
    )
    reports = []
    try:
        for extra in ([], ["--allow-unexercised"]):
            path = home / f"r{len(reports)}.json"
            out = run_cli(
                *lab_flags(home, address=temporal_address),
                "chaos",
                "--workflow",
                "SendLines",
                "--input",
                '{"count": 1, "pace": 0}',
                "--schedule",
                str(schedule),
                "--json",
                str(path),
                *extra,
                timeout=180,
            )
            reports.append((out, json.loads(path.read_text())))
    finally:
        stop_lab(home)
    for (out, report), code in zip(reports, (1, 0), strict=True):
        assert out.returncode == code, out.stdout[-3000:] + out.stderr[-2000:]
        assert report["kills"] == [] and report["windows"] == {}, report["kills"]
        assert [n["why"] for n in report["not_fired"]] == ["the run closed before it fired"]
        exercised = [c for c in report["checks"] if c["name"] == "chaos: a fault reached an aimed activity"]
        assert exercised and "NOT EXERCISED" in exercised[0]["observed"]
    assert "verdict: NOT EXERCISED" in reports[0][0].stdout and "verdict: PASS" in reports[1][0].stdout


def test_a_signal_that_left_after_the_close_is_listed_not_counted():
    from checkpoint_tui.proof.chaos.engine import Chaos
    from checkpoint_tui.proof.nemeses.records import Fired

    chaos = object.__new__(Chaos)
    late, early = Fired("worker-in-activity", 3, 1, 110.25), Fired("worker-in-activity", 2, 1, 99.0)
    chaos.kills, chaos.pauses, chaos.not_fired = [early, late], [], []
    chaos._events = {id(late): {"at_step": 3, "nemesis": "worker-in-activity"}}
    chaos._after_close(110.0)
    assert chaos.kills == [early]
    assert [n.to_json() for n in chaos.not_fired] == [
        {"at_step": 3, "nemesis": "worker-in-activity", "why": "fired 0.25 s after the run closed: not counted"}
    ]
    chaos._after_close(None)  # a close not known (a run still open): nothing moved
    assert chaos.kills == [early]


def test_each_crash_point_lands_in_its_window_on_a_1_ms_tool(session_root, temporal_address):
    """The blind mailer with 1 ms sends and 1 ms model requests, a schedule of the hop's three crash points:
    after the effect the email goes out twice (DUPLICATED, that call named); before it, the call runs again
    with its email once; after Temporal recorded it, nothing runs again."""
    home = session_root / f"dest-windows-{next(_homes)}"
    home.mkdir(parents=True)
    schedule = home / "s.json"
    kinds = {2: "worker-after-effect", 3: "worker-before-effect", 4: "worker-after-record"}
    schedule.write_text(
        json.dumps(
            {
                "steps": 5,
                "events": [
                    {"at_step": k, "nemesis": kind, "target": "worker", "delay_ms": 0} for k, kind in kinds.items()
                ],
            }
        )
    )
    try:
        out = run_cli(
            *lab("pydantic-ai", home, address=temporal_address),
            "--effects",
            f"file:{home}/example-out",
            "chaos",
            "--workflow",
            "PydanticMailer",
            "--input",
            json.dumps({"turns": 5, "pace": 0.001, "think": 0.001}),
            "--aim",
            "tool",
            "--schedule",
            str(schedule),
            "--json",
            str(home / "r.json"),
            timeout=240,
        )
        report = json.loads((home / "r.json").read_text())
    finally:
        stop_lab(home)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    kills = {k["kind"]: k for k in report["kills"]}
    assert set(kills) == set(kinds.values()), report["not_fired"]
    audit = report["audit"]
    # the tools that ran again: a model request the after-record kill caught in flight (1 ms tools: the
    # next request may be on the worker before the kill lands) re-runs as a model request, not a tool
    again = {r["activity_id"] for r in audit["re_executed"] if r["class"] == "tool"}
    after, before, recorded = (str(kills[k]["activity_id"]) for k in kinds.values())
    assert [d["activity_ids"] for d in audit["destination_duplicates"]] == [[after]]  # twice, and that call named
    assert {r["activity_id"] for r in audit["effect_once"]} == {before}  # ran again, its email once
    assert recorded not in again and again == {after, before}  # recorded: nothing ran again
    assert audit["duplicated"] == 1 and sum(n - 1 for n in sent(home, report["run_id"]).values()) == 1
    assert [kills[k]["landed"] for k in kinds.values()] == ["inside", "inside", "after it closed"]


def test_every_window_kills_each_tool_once_in_each_window_and_tabulates_it(session_root, temporal_address):
    """chaos --every-window on the blind mailer: a run per window, the table says what each kill did to
    send_email's effect (before: effect once; after: DUPLICATED; recorded: nothing ran again); exit 1."""
    home = session_root / f"dest-every-{next(_homes)}"
    path = home / "r.json"
    try:
        out = run_cli(
            *lab("pydantic-ai", home, address=temporal_address),
            "--effects",
            f"file:{home}/example-out",
            "chaos",
            "--workflow",
            "PydanticMailer",
            "--input",
            json.dumps({"turns": 2, "pace": 0.05, "think": 0.05}),
            "--every-window",
            "--json",
            str(path),
            timeout=300,
        )
        report = json.loads(path.read_text())
    finally:
        stop_lab(home)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    assert report["every_window"]["table"] == {
        "tool · send_email": {
            "worker-before-effect": "effect once",
            "worker-after-effect": "DUPLICATED 1",
            "worker-after-record": "held: nothing ran again",
        }
    }
    assert "tool · send_email  effect once" in out.stdout and "verdict: FAIL" in out.stdout


def test_a_tool_exactly_once_by_its_own_means_passes_when_its_file_is_read(session_root):
    """SendLinesIdempotent appends a line only if the file lacks it, with no library: the seeded after-effect
    crash point re-runs one send, the file holds each line once, and the verdict is PASS ('effect once'),
    its kill's wait explained by the lab's crash point (no lost work)."""
    from test_user_workflow_chaos import chaos
    from test_user_workflow_lab import lab_flags

    home = session_root / f"dest-idem-{next(_homes)}"
    home.mkdir(parents=True)
    out, report = chaos(
        [*lab_flags(home), "--effects", f"file:{home}/example-out"],
        home,
        "--workflow",
        "SendLinesIdempotent",
        "--input",
        '{"count": 6, "pace": 0.05}',
        "--seed",
        "4",
        "--kills",
        "3",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert [k["kind"] for k in report["kills"] if k["kind"].startswith("worker-")] == ["worker-after-effect"]
    assert len(audit["effect_once"]) == 1 and audit["at_risk"] == [] and audit["lost_work_count"] == 0
    assert "re-executed · effect once at file:" in out.stdout and "verdict: PASS" in out.stdout


def test_a_dependency_s_2xx_answers_are_its_effects(tmp_path):
    """http:NAME:FIELD: a real HTTP server behind the dependency proxy; each request answered 2xx is one
    effect, by its header or JSON body field, on kept-alive connections; a 5xx is none; bytes that are not
    HTTP are forwarded and not logged."""
    import asyncio
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx

    from checkpoint_tui.proof.nemeses.dependency import DependencyProxy
    from checkpoint_tui.proof.nemeses.http_log import HttpLog, log_path

    class Mail(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            code = 500 if body.get("fail") else 201
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Mail)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def drive() -> int:
        proxy = DependencyProxy(
            "MAIL", f"127.0.0.1:{server.server_port}", HttpLog(log_path(tmp_path, "MAIL"), "message_id")
        )
        address = await proxy.start()
        try:
            async with httpx.AsyncClient(base_url=f"http://{address}") as client:  # one kept-alive connection
                for body in (
                    {"message_id": "m1"},
                    {"message_id": "m1"},
                    {"message_id": "m2", "fail": True},
                    {"message_id": "m3", "to": "x"},
                ):
                    await client.post("/send", json=body)
                await client.post("/send", json={"x": 1}, headers={"Message_Id": "h1"})  # a header, any case
            reader, writer = await asyncio.open_connection(*address.split(":"))
            writer.write(b"\x16\x03\x01 not http\r\n\r\n")  # garbage: forwarded, never logged
            await writer.drain()
            writer.close()
            return proxy.counts["connections"]
        finally:
            await proxy.close()

    try:
        assert asyncio.run(drive()) == 2
    finally:
        server.shutdown()
        server.server_close()
    spec = parse_destination("http:MAIL:message_id")
    assert spec.label == "http:MAIL:message_id"
    assert read_ids(spec, tmp_path) == Counter({"m1": 2, "m3": 1, "h1": 1})
    with pytest.raises(DestinationError, match="--dependency"):
        read_ids(spec)  # outside chaos there is no proxy to read


def test_the_fixture_s_default_for_a_user_workflow_is_every_window():
    from checkpoint_tui.lab.pytest_plugin import chaos_words

    plain = {"worker_cmd": "python w.py", "workflow": "W"}
    assert chaos_words({}, plain, None) == {**plain, "every_window": True}
    assert chaos_words({"kills": 4}, plain, None) == {**plain, "kills": 4, "seed": 1}  # the marker's words
    assert chaos_words({}, plain, 3) == {**plain, "seed": 3}  # seeds=
    assert chaos_words({}, {**plain, "every_window": False}, None) == {**plain, "every_window": False, "seed": 1}
    assert chaos_words({}, {"steps": 6}, None) == {"steps": 6, "seed": 1}  # our own loop: a seeded schedule
