"""The Dagster instance on a real PostgreSQL server, as deployed (docs/deployment.md).

A throwaway PostgreSQL cluster is created with `initdb` in a temporary directory and started with `pg_ctl` on
127.0.0.1 (password authentication over TCP, its unix socket in the same directory). Two paths are exercised:

- `runs.launch()` (what the CLI, the demo and the service's `wait_for_response` use) against an instance whose
  dagster.yaml names the server: runs, materialisations and check results land in Postgres tables;
- the production path with `deploy/dagster.yaml` unchanged: the code-location gRPC server and `dagster-daemon`
  started with the commands of `deploy/docker-compose.yml`, the sensor requesting a run, the QueuedRunCoordinator
  queueing it and the daemon launching it through the gRPC server.

The server binaries come from PATH or Debian's /usr/lib/postgresql/<version>/bin (`.ci/run` installs the
`postgresql` package when they are missing, and sets REFLEXIO_REQUIRE_POSTGRES=1 so that a missing server fails
the run instead of skipping it).
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psycopg2
import pytest
import yaml

from reflexio_pipelines.demo.run import sample_conversations
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows
from reflexio_pipelines.runs import launch
from reflexio_pipelines.search.versions import current_version
from reflexio_pipelines.settings import Settings
from tests.support.landing import land
from tests.support.processes import child_env, free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"

#: Assets `extract_job` + `index_job` (and `learn_job`) materialise for a window with learnable turns.
LEARNING_ASSETS = {"turns", "user_profiles", "user_playbooks", "search_index", "serving_index"}


def _server_bin_dir() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres: PATH first, else the newest Debian server package."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(os.path.realpath(on_path)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


@dataclass
class PostgresServer:
    """A running throwaway cluster: connection parameters and a way to create databases."""

    port: int
    username: str
    password: str
    host: str = "127.0.0.1"

    def connect(self, db_name: str = "postgres"):
        return psycopg2.connect(
            host=self.host, port=self.port, user=self.username, password=self.password, dbname=db_name
        )

    def create_database(self, name: str) -> str:
        conn = self.connect()
        conn.autocommit = True  # CREATE DATABASE cannot run inside a transaction
        try:
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return name

    def env(self, db_name: str) -> dict[str, str]:
        """The variables deploy/dagster.yaml reads its storage settings from."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": self.username,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": db_name,
        }

    def query(self, db_name: str, sql: str, params: tuple = ()) -> list[tuple]:
        conn = self.connect(db_name)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway cluster for this module: password authentication on 127.0.0.1, removed afterwards."""
    bin_dir = _server_bin_dir()
    if bin_dir is None:
        reason = "PostgreSQL server binaries (initdb, pg_ctl) not found; install Debian's `postgresql` (.ci/run does)"
        if os.environ.get("REFLEXIO_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    # The server refuses to run as root; CI may run as root, so the cluster then belongs to the `postgres`
    # account the Debian package creates (or `nobody`) and every server command runs as that user.
    as_user: list[str] = []
    owner = None
    if os.geteuid() == 0:
        owner = _unprivileged_account()
        as_user = ["runuser", "-u", owner.pw_name, "--"]
    # Not under pytest's tmp_path: that lives below a 0700 directory of the current user, which `postgres`
    # could not enter.
    base = Path(tempfile.mkdtemp(prefix="reflexio-pg-"))
    password = os.urandom(12).hex()
    pwfile = base / "pwfile"
    pwfile.write_text(password + "\n")
    if owner is not None:
        for path in (base, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    data, port = base / "data", free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, text=True, timeout=120)

    try:
        run(
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "reflexio",
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        run(
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(base / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -k {base}",
            "start",
        )
    except subprocess.CalledProcessError as exc:
        log = (base / "server.log").read_text() if (base / "server.log").exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {exc.stderr}\n{log}") from exc
    try:
        yield PostgresServer(port=port, username="reflexio", password=password)
    finally:
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


def _unprivileged_account() -> pwd.struct_passwd:
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a `postgres` nor a `nobody` account exists to run the server")


def _materialised_assets(server: PostgresServer, db: str, run_ids: list[str]) -> set[str]:
    rows = server.query(
        db,
        "SELECT asset_key FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' AND run_id = ANY(%s)",
        (run_ids,),
    )
    return {json.loads(key)[-1] for (key,) in rows}


def _assert_learned(lake: Lake, window: str) -> None:
    """The lake tables were written for the window and an index version is live."""
    assert lake.read_table("turns", window).num_rows > 0
    assert lake.read_table("user_profiles", window).num_rows > 0
    assert lake.read_table("user_playbooks", window).num_rows > 0
    assert current_version(lake.index_root) is not None


def _assert_secret_absent(server: PostgresServer, db: str, lake: Lake) -> None:
    """The database password is in neither the run records nor the lake."""
    dumped = server.query(db, "SELECT coalesce(string_agg(run_body, ''), '') FROM runs")[0][0]
    dumped += server.query(db, "SELECT coalesce(string_agg(event, ''), '') FROM event_logs")[0][0]
    assert server.password not in dumped
    for path in lake.root.rglob("*"):
        if path.is_file():
            assert server.password.encode() not in path.read_bytes(), path


def test_launch_records_runs_materialisations_and_checks_in_postgres(postgres, tmp_path, monkeypatch):
    db = postgres.create_database("dagster_launch")
    home = tmp_path / "dagster_home"
    home.mkdir()
    # The password is read from the environment when the instance loads; the file names only the variable.
    (home / "dagster.yaml").write_text(
        yaml.safe_dump(
            {
                "storage": {
                    "postgres": {
                        "postgres_db": {
                            "hostname": postgres.host,
                            "port": postgres.port,
                            "username": postgres.username,
                            "password": {"env": "REFLEXIO_TEST_PG_PASSWORD"},
                            "db_name": db,
                            "scheme": "postgresql+psycopg2",
                        }
                    }
                },
                "telemetry": {"enabled": False},
            }
        )
    )
    monkeypatch.setenv("REFLEXIO_TEST_PG_PASSWORD", postgres.password)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    lake = Lake.at(tmp_path / "lake")
    land(lake, sample_conversations())
    (pending,) = pending_windows(lake, GRANULARITY)

    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        result = launch(settings=Settings(lake=str(lake.root)), instance=instance)

    assert result.success and result.partition_keys == [pending.partition_key] and len(result.run_ids) == 2
    runs = dict(postgres.query(db, "SELECT run_id, status FROM runs"))
    assert runs == {run_id: "SUCCESS" for run_id in result.run_ids}
    jobs = {name for (name,) in postgres.query(db, "SELECT DISTINCT pipeline_name FROM runs")}
    assert jobs == {"extract_job", "index_job"}
    assert _materialised_assets(postgres, db, result.run_ids) >= LEARNING_ASSETS
    # The blocking check between build and publish ran and passed, recorded in Postgres like everything else.
    checks = postgres.query(db, "SELECT check_name, execution_status FROM asset_check_executions")
    assert ("search_index_is_servable", "SUCCEEDED") in checks
    _assert_learned(lake, pending.window)
    _assert_secret_absent(postgres, db, lake)


def _compose_service(service: str) -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"][service]


def _installed(command: list[str], replacements: dict[str, str]) -> list[str]:
    """A command from deploy/docker-compose.yml with the values after the given flags replaced (the containers
    listen on 0.0.0.0:4000; here it must be 127.0.0.1 and a free port), run from this virtualenv."""
    command = list(command)
    for flag, value in replacements.items():
        command[command.index(flag) + 1] = value
    executable = shutil.which(command[0], path=str(Path(sys.executable).parent))
    assert executable, f"{command[0]} is not installed next to {sys.executable}"
    return [executable, *command[1:]]


class _Processes:
    """Child processes with their logs, stopped (with their own children: run workers) on exit."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env, self.procs = logs, env, []
        logs.mkdir()

    def start(self, name: str, command: list[str]) -> None:
        with open(self.logs / f"{name}.log", "wb") as out:
            self.procs.append(
                subprocess.Popen(
                    command, env=self.env, cwd=self.logs, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

    def tails(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.logs.iterdir())

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)


def _wait(predicate, timeout_s: float, what: str, procs: _Processes):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"{what} within {timeout_s} s\n{procs.tails()}")


def _finished_learn_run(server: PostgresServer, db: str) -> tuple[str, str] | None:
    """(run_id, status) of the first learn_job run that has finished, if any."""
    # The daemon creates the schema on first connect; until then there is nothing to poll.
    if not server.query(db, "SELECT 1 FROM information_schema.tables WHERE table_name = 'runs'"):
        return None
    rows = server.query(
        db,
        "SELECT run_id, status FROM runs WHERE pipeline_name = 'learn_job' "
        "AND status IN ('SUCCESS', 'FAILURE', 'CANCELED')",
    )
    return rows[0] if rows else None


def test_deploy_instance_queues_sensor_runs_and_the_daemon_launches_them(postgres, tmp_path, monkeypatch):
    db = postgres.create_database("dagster_deploy")
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    port = free_port()
    workspace = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())
    workspace["load_from"][0]["grpc_server"].update(host="127.0.0.1", port=port)
    (tmp_path / "workspace.yaml").write_text(yaml.safe_dump(workspace))
    lake = Lake.at(tmp_path / "lake")
    land(lake, sample_conversations())
    (pending,) = pending_windows(lake, GRANULARITY)
    env = child_env(lake.root, home, **postgres.env(db))
    for name, value in postgres.env(db).items():
        monkeypatch.setenv(name, value)

    with dg.DagsterInstance.from_config(str(home)) as instance:
        coordinator = instance.run_coordinator
        assert type(coordinator).__name__ == "QueuedRunCoordinator"
        queue = instance.get_concurrency_config().run_queue_config
        assert queue.max_concurrent_runs == 4
        assert queue.tag_concurrency_limits == [
            {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
        ]

    procs = _Processes(tmp_path / "logs", env)
    grpc_port = {"-h": "127.0.0.1", "-p": str(port)}
    try:
        procs.start("code-location", _installed(_compose_service("code-location")["command"], grpc_port))
        # The daemon starts once the code location passes the compose healthcheck (depends_on: service_healthy).
        health = _installed(_compose_service("code-location")["healthcheck"]["test"][1:], {"-p": str(port)})
        _wait(
            lambda: subprocess.run(health, env=env, capture_output=True).returncode == 0,
            180,
            "the code location did not become healthy",
            procs,
        )
        workspace_flag = {"-w": str(tmp_path / "workspace.yaml")}
        procs.start("daemon", _installed(_compose_service("daemon")["command"], workspace_flag))
        run_id, status = _wait(lambda: _finished_learn_run(postgres, db), 420, "no learn_job run finished", procs)
    finally:
        procs.stop()
    assert status == "SUCCESS", procs.tails()

    tags = dict(postgres.query(db, "SELECT key, value FROM run_tags WHERE run_id = %s", (run_id,)))
    assert tags["dagster/sensor_name"] == "landing_sensor"
    assert tags["dagster/partition"] == pending.partition_key
    events = [
        e
        for (e,) in postgres.query(
            db,
            "SELECT dagster_event_type FROM event_logs WHERE run_id = %s "
            "AND dagster_event_type IS NOT NULL ORDER BY id",
            (run_id,),
        )
    ]
    # Queued by the coordinator, launched by the daemon's run queue, then executed by the run worker.
    assert events.index("PIPELINE_ENQUEUED") < events.index("PIPELINE_STARTING") < events.index("PIPELINE_START")
    assert _materialised_assets(postgres, db, [run_id]) >= LEARNING_ASSETS
    _assert_learned(lake, pending.window)
    _assert_secret_absent(postgres, db, lake)
