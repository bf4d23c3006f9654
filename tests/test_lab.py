"""The lab: two workers as two boxes on a real redis-server, the shared store on a
real PostgreSQL cluster (tests/services.py), faults made for real (SIGKILL of a
worker mid-job, PostgreSQL stopped under a running worker, a job that hangs)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import redis

from conftest import PERFLAB, assert_one_line_error
from services import free_port, until

COMMANDS = ["/bin/sleep 0.05", "/bin/sleep 0.051", "/bin/sleep 0.052", "/bin/sleep 0.053"]
# A worker's heartbeat, in seconds: its heartbeat key (what `queue` and the dashboard show) lives
# 3 beats + 1 s. With 0.3 s (1 s of life) a heartbeat thread held back for 0.7 s on a loaded
# machine made the box look worker-less for a moment; 1 s beats live 4 s.
HEARTBEAT = "1"


def _env(tmp: Path, **extra) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"), XDG_STATE_HOME=str(tmp / "state"), **extra)
    env.pop("PERFLAB_DB", None)
    env.pop("PERFLAB_DEBUG", None)
    return env


class Lab:
    def __init__(self, tmp: Path, broker: str, db: str):
        self.tmp, self.broker, self.db = tmp, broker, db
        self.env = _env(tmp, PERFLAB_BROKER=broker)
        self.workers: dict[str, subprocess.Popen] = {}
        self.redis = redis.Redis.from_url(broker, decode_responses=True)

    def spool(self, box: str) -> Path:
        return self.tmp / f"spool-{box}"

    def start_worker(self, box: str, serves: str = "--box", visibility_timeout: str = "3") -> subprocess.Popen:
        """`perflab worker` for BOX (`serves="--machine"`: the configured SSH machine of that name)."""
        log = open(self.tmp / f"worker-{box}.log", "ab")
        proc = subprocess.Popen([PERFLAB, "worker", serves, box, "--db", self.db, "--spool", str(self.spool(box)),
                                 "--visibility-timeout", visibility_timeout, "--heartbeat", HEARTBEAT],
                                env=self.env, cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT)
        self.workers[box] = proc
        return proc

    def perflab(self, *args, check=True, timeout=60) -> subprocess.CompletedProcess:
        proc = subprocess.run([PERFLAB, *map(str, args)], env=self.env, cwd=self.tmp, capture_output=True,
                              text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"perflab {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
                                 f"\n{self.logs()}")
        return proc

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.tmp.glob("worker-*.log"))

    def submit(self, job: Path, *boxes: str, tag: str | None = None) -> str:
        args = ["submit", job] + [a for b in boxes for a in ("--box", b)] + (["--tag", tag] if tag else [])
        return self.perflab(*args).stdout.strip()

    def progress(self, sid: str) -> dict:
        return self.redis.hgetall(f"perflab:submission:{sid}")

    def worker_state(self, box: str) -> dict:
        for key in self.redis.scan_iter(f"perflab:worker:{box}:*"):
            state = self.redis.hgetall(key)
            if state and int(state["pid"]) == self.workers[box].pid:
                return state
        return {}

    def wait_until(self, what: str, predicate, timeout: float = 120.0, step: float = 0.05):
        return until(what, predicate, timeout, step, show=lambda: "\n" + self.logs())

    def stop(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def lab_on(tmp_path, redis_server):
    labs = []

    def make(db: str) -> Lab:
        lab = Lab(tmp_path, redis_server.url, db)
        labs.append(lab)
        return lab

    yield make
    for lab in labs:
        lab.stop()


def _write_job(tmp: Path, name: str, doc: dict) -> Path:
    path = tmp / name
    path.write_text(json.dumps(doc))   # JSON is YAML
    return path


def _ended(progress: dict, box: str) -> int:
    return sum(int(progress.get(f"{what}:{box}", 0)) for what in ("done", "failed", "cancelled"))


def _spool_running(lab: Lab, box: str) -> bool:
    path = lab.spool(box) / f"{box}.db"
    if not path.exists():
        return False
    con = sqlite3.connect(path, timeout=5)
    try:
        return bool(con.execute("SELECT count(*) FROM run WHERE status = 'running'").fetchone()[0])
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


def test_two_boxes_survive_a_killed_worker_and_a_store_outage(tmp_path, lab_on, postgres_cluster, postgres_url):
    lab = lab_on(postgres_url)
    job = _write_job(tmp_path, "matrix.yaml", {"benchmark": "cmd", "runs": 3, "command": COMMANDS})
    lab.start_worker("A")
    lab.start_worker("B")
    lab.wait_until("both workers' heartbeats", lambda: lab.worker_state("A") and lab.worker_state("B"))
    sid = lab.submit(job, "A", "B")
    assert len(sid) == 12

    # kill -9 of A while its run is being recorded (in its spool): A is stopped (SIGSTOP) once a run
    # is seen under way and killed only if the run is still under way then, so that the kill lands
    # mid-run however long this process waits between the look and the kill.
    def a_stopped_mid_run() -> bool:
        if not _spool_running(lab, "A"):
            return False
        lab.workers["A"].send_signal(signal.SIGSTOP)
        if _spool_running(lab, "A"):
            return True
        lab.workers["A"].send_signal(signal.SIGCONT)   # the run ended meanwhile: look again
        return False

    lab.wait_until("a run of box A under way", a_stopped_mid_run, step=0.005)
    lab.workers["A"].send_signal(signal.SIGKILL)
    lab.workers["A"].wait()
    # the store goes away under B, which goes on running its jobs into its spool
    postgres_cluster.stop()
    try:
        lab.wait_until("box B done while the store is down", lambda: _ended(lab.progress(sid), "B") == len(COMMANDS))
        # The heartbeat says "idle" at its next beat after the last job ended: wait for it.
        state = lab.wait_until("B's heartbeat naming the spool, idle",
                               lambda: (s := lab.worker_state("B")) and s["last_error"].startswith("store:")
                               and s["state"] == "idle" and s)
        assert int(state["spooled"]) >= 1
        shown = lab.perflab("queue").stdout
        assert "B " in shown and "store:" in shown
        lab.start_worker("A")   # A returns while the store is still down
        # the killed job comes back after the visibility timeout (3 s) and kombu's next sweep
        lab.wait_until("A's jobs, the killed one again", lambda: _ended(lab.progress(sid), "A") == len(COMMANDS))
    finally:
        postgres_cluster.start()
    for box in ("A", "B"):
        lab.wait_until(f"{box}'s spool uploaded",
                       lambda: (s := lab.worker_state(box)) and s["spooled"] == "0" and not s["last_error"])
    progress = lab.progress(sid)
    assert progress["done:A"] == progress["done:B"] == str(len(COMMANDS)), progress

    name = postgres_url.rsplit("/", 1)[1]
    runs = postgres_cluster.sql(name, "SELECT r.id, b.name, r.status, r.job, r.uuid FROM run r "
                                      "JOIN testbox b ON b.id = r.testbox_id ORDER BY r.id")
    finished = {}
    for run_id, box, status, job_doc, _ in runs:
        job_doc = json.loads(job_doc) if isinstance(job_doc, str) else job_doc
        assert job_doc["lab"]["submission"] == sid
        if status == "finished":
            key = (box, job_doc["params"]["command"])
            assert key not in finished, f"{key} completed twice"
            finished[key] = job_doc["lab"]
    assert set(finished) == {(box, c) for box in ("A", "B") for c in COMMANDS}
    # the killed attempt: kept, marked interrupted, and its job completed by a later attempt
    interrupted = [(box, json.loads(j) if isinstance(j, str) else j) for _, box, st, j, _ in runs if st == "interrupted"]
    assert len(interrupted) == 1 and interrupted[0][0] == "A", runs
    killed = interrupted[0][1]
    again = finished[("A", killed["params"]["command"])]
    assert again["task"] == killed["lab"]["task"] and again["attempt"] > killed["lab"]["attempt"]
    assert len({r[4] for r in runs}) == len(runs)
    duplicates = postgres_cluster.sql(name, "SELECT run_id, metric, repetition, process, count(*) FROM sample "
                                            "GROUP BY run_id, metric, repetition, process HAVING count(*) > 1")
    assert duplicates == []
    # the same jobs on two boxes compare; the environment differences come first
    shown = lab.perflab("--db", postgres_url, "compare", "--cross-box", "box=A", "box=B").stdout
    assert "environment differences" in shown and "testbox: A -> B" in shown
    assert shown.index("environment differences") < shown.index("time.elapsed_time")


def test_a_hanging_job_is_killed_and_the_queue_moves_on(tmp_path, lab_on):
    lab = lab_on(str(tmp_path / "shared.db"))
    hang = _write_job(tmp_path, "hang.yaml", {"benchmark": "cmd", "runs": 1, "timeout": 0.5, "command": "/bin/sleep 30"})
    quick = _write_job(tmp_path, "quick.yaml", {"benchmark": "cmd", "runs": 2, "command": "/bin/true"})
    lab.start_worker("C")
    first = lab.submit(hang, "C")
    second = lab.submit(quick, "C", tag="after")
    waited = lab.perflab("submit", quick, "--box", "C", "--wait", timeout=60)
    assert "C: 1 done, 0 failed" in waited.stderr
    assert lab.progress(first)["failed:C"] == "1" and lab.progress(second)["done:C"] == "1"
    lab.wait_until("uploads", lambda: (s := lab.worker_state("C")) and s["spooled"] == "0")
    con = sqlite3.connect(tmp_path / "shared.db")
    rows = con.execute("SELECT status, error, tag FROM run ORDER BY id").fetchall()
    con.close()
    failed = [r for r in rows if r[0] == "failed"]
    assert len(failed) == 1 and "timed out" in (failed[0][1] or ""), rows
    assert [r[0] for r in rows].count("finished") == 2 and ("finished", None, "after") in rows


def test_cancel_stops_the_running_job_and_skips_the_queued(tmp_path, lab_on):
    lab = lab_on(str(tmp_path / "shared.db"))
    # Jobs far longer than any wait here: the cancelled run ends long before its own end.
    slow = _write_job(tmp_path, "slow.yaml", {"benchmark": "cmd", "runs": 1,
                                              "command": ["/bin/sleep 600", "/bin/sleep 601", "/bin/sleep 602"]})
    lab.start_worker("D")
    sid = lab.submit(slow, "D")
    lab.wait_until("the job running", lambda: lab.worker_state("D").get("state") == "running")
    began = time.monotonic()
    out = lab.perflab("cancel", sid).stdout
    assert sid in out
    lab.wait_until("all cancelled", lambda: _ended(lab.progress(sid), "D") == 3, timeout=300)
    assert time.monotonic() - began < 600   # the running job stopped, not the 1803 s the jobs would take
    assert lab.progress(sid)["cancelled:D"] == "3"
    lab.wait_until("upload", lambda: (s := lab.worker_state("D")) and s["spooled"] == "0")
    con = sqlite3.connect(tmp_path / "shared.db")
    assert con.execute("SELECT status FROM run").fetchall() == [("interrupted",)]
    con.close()
    assert_one_line_error(lab.perflab("cancel", "nosuchid", check=False), "nosuchid")


def test_submit_fails_at_once_when_the_broker_is_away(tmp_path):
    job = _write_job(tmp_path, "j.yaml", {"benchmark": "cmd", "command": "/bin/true"})
    env = _env(tmp_path)
    proc = subprocess.run([PERFLAB, "submit", str(job), "--box", "A", "--broker", f"redis://127.0.0.1:{free_port()}/0"],
                          env=env, capture_output=True, text=True, timeout=30)
    assert_one_line_error(proc, "broker", "unreachable")
    bad = subprocess.run([PERFLAB, "submit", str(job), "--box", "a/b", "--broker", "redis://127.0.0.1:1/0"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert_one_line_error(bad, "a/b")


# -- across boxes (deliverable 5) ----------------------------------------------------------

def test_report_lmbench_gives_one_row_per_box(cli, tmp_path):
    import fixtures_lmbench

    doc = fixtures_lmbench.export_document()
    twin = json.loads(json.dumps(doc["runs"][0]))   # the same kernel on a second box, 2x slower syscalls
    twin.update(uuid="00000000-0000-4000-8000-00000000beef", testbox="xeon4")
    twin["samples"] = [[m, v * 2 if m.startswith("syscall.") else v, *rest] for m, v, *rest in twin["samples"]]
    doc["runs"].append(twin)
    path = tmp_path / "two-boxes.json"
    path.write_text(json.dumps(doc))
    cli("import", path)
    out = cli("report", "lmbench", "2.6.0-test3").stdout
    lines = [l for l in out.splitlines() if l.startswith(("k6-2:", "xeon4:"))]
    boxes = [l.split(":")[0] for l in lines]
    assert "k6-2" in boxes and "xeon4" in boxes, out
    every = cli("report", "lmbench", "--all-boxes").stdout
    assert sum(l.startswith("k6-2:") for l in every.splitlines()) >= 2 and "xeon4:" in every


def test_report_table_pivots_rows_by_parameter_and_columns_by_box_and_tag(cli):
    for box in ("bare", "kvm"):
        for tag in ("without", "with"):
            for command in ("/bin/sleep 0.01", "/bin/true"):
                cli("run", "cmd", "--runs", "2", "--box", box, "--tag", tag, "--", *command.split())
    out = cli("report", "table", "--rows", "command", "--cols", "box,tag", "time.elapsed_time").stdout
    lines = out.splitlines()
    assert lines[0] == "time.elapsed_time (s)"
    assert lines[1].split() == ["box", "bare", "bare", "kvm", "kvm"]
    assert lines[2].split() == ["command", "\\", "tag", "without", "with", "without", "with"]
    body = {l.split("  ")[0].strip(): l for l in lines[4:]}
    assert set(body) == {"/bin/sleep 0.01", "/bin/true"}
    # Each cell the mean of that box's and tag's stored wall times of the command (real ones: sleep 0.01
    # never takes less than 0.01 s), in the columns' order.
    for command, line in body.items():
        cells = [float(v) for v in line.split()[-4:]]
        means = [cli.sql("SELECT avg(s.value) FROM sample s JOIN run r ON r.id = s.run_id "
                         "JOIN testbox b ON b.id = r.testbox_id WHERE s.metric = 'time.elapsed_time' AND b.name = ? "
                         "AND r.tag = ? AND r.params LIKE ?",
                         (box, tag, f'%"{command}"%'))[0][0]
                 for box in ("bare", "kvm") for tag in ("without", "with")]
        assert cells == pytest.approx(means, rel=1e-3), (command, line, means)   # shown to 4 digits
    assert all(v > 0.009 for v in (float(x) for x in body["/bin/sleep 0.01"].split()[-4:]))
    assert_one_line_error(cli("report", "table", "--rows", "nope", "--cols", "box", check=False), "nope")
    assert_one_line_error(cli("report", "table", "--rows", "command", "--cols", "box", "no.such", check=False),
                          "no.such")


# -- the live dashboard (deliverable 6) ----------------------------------------------------

from test_html import browser  # noqa: E402,F401  (headless Chromium, the HTML report's fixture)


def test_dashboard_shows_boxes_queues_and_runs_in_chromium(tmp_path, lab_on, browser):  # noqa: F811
    import urllib.error
    import urllib.request

    lab = lab_on(str(tmp_path / "shared.db"))
    job = _write_job(tmp_path, "j.yaml", {"benchmark": "cmd", "runs": 2, "command": "/bin/true"})
    lab.start_worker("E")
    sid = lab.submit(job, "E", tag="dash")
    lab.wait_until("the job", lambda: lab.progress(sid).get("done:E") == "1")
    # The job is counted done before the worker says idle and uploads its run: wait for both.
    lab.wait_until("its upload, the worker idle",
                   lambda: (s := lab.worker_state("E")) and s["spooled"] == "0" and s["state"] == "idle")
    port = free_port()
    server = subprocess.Popen([PERFLAB, "serve", "--db", lab.db, "--port", str(port), "--broker", lab.broker],
                              env=lab.env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert f"http://127.0.0.1:{port}/" in server.stderr.readline()   # loopback unless told otherwise
        browser.get(f"http://127.0.0.1:{port}/")
        # Both tables read at once: the page reloads itself every 10 s.
        boxes, runs = browser.execute_script("return [document.getElementById('boxes').innerText, "
                                             "document.getElementById('runs').innerText]")
        assert "E" in boxes and "idle" in boxes
        assert "dash" in runs and "finished" in runs
        browser.get(f"http://127.0.0.1:{port}/report?box=E")
        lab.wait_until("the report page's script", lambda: browser.execute_script("return document.readyState") == "complete")
        assert "perflab lab report" in browser.title
        severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
        assert severe == []
        request = urllib.request.Request(f"http://127.0.0.1:{port}/", method="POST", data=b"x")
        try:
            urllib.request.urlopen(request, timeout=10)
            raise AssertionError("a POST was accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 405
    finally:
        server.terminate()
        server.wait(10)
