"""deploy/: the compose file, the image, the instance and workspace configs agree with each other and with the code.

No Docker daemon is needed (CI has none): the compose file is parsed as YAML and every command is checked against
what is installed here, with the same entry points the image installs. Loading deploy/dagster.yaml into a live
instance needs a database, so that half lives in test_postgres_instance.py; here its schema is validated offline.
deploy/readiness.py is run against a real service on 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml
from dagster._core.instance.config import dagster_instance_config

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.search.types import SearchDoc
from reflexio_pipelines.search.versions import publish_index
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.processes import child_env
from tests.support.servers import serve_app

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = (DEPLOY / "Dockerfile").read_text()
#: Services running the project's image, each loading deploy/dagster.yaml and the lake.
APP_SERVICES = ("code-location", "webserver", "daemon", "reflexio")


def _dockerfile_env() -> dict[str, str]:
    """ENV values of the final stage (`ENV A=1 \\ B=2` form)."""
    final = DOCKERFILE.split("\nFROM ")[-1]
    body = " ".join(m.replace("\\\n", " ") for m in re.findall(r"^ENV ((?:.*\\\n)*.*)$", final, re.M))
    return dict(pair.split("=", 1) for pair in body.split())


def _copies() -> list[tuple[str, str]]:
    """(source, destination) of every COPY from the build context (not from another stage)."""
    return [
        tuple(line.split()[1:3])
        for line in DOCKERFILE.splitlines()
        if line.startswith("COPY ") and "--from=" not in line
    ]


def test_compose_services_and_shared_volumes():
    assert set(SERVICES) == {"postgres", *APP_SERVICES}
    for name in APP_SERVICES:
        service = SERVICES[name]
        assert service["image"] == "reflexio-lake:latest"
        build = service["build"]
        # Paths in a compose file are relative to it: the context is the repository, the Dockerfile inside it.
        assert (DEPLOY / build["context"] / "pyproject.toml").is_file()
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        # One lake and one Dagster storage directory for all: run workers (in code-location) write compute logs
        # the webserver shows; service replicas read index versions the pipeline publishes.
        assert "lake:/data/lake" in service["volumes"]
        assert "dagster_storage:/opt/dagster/dagster_home/storage" in service["volumes"]
    assert set(COMPOSE["volumes"]) == {"lake", "dagster_storage", "pgdata"}
    assert SERVICES["reflexio"]["deploy"]["replicas"] >= 2


def test_published_ports_are_loopback_only():
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), (name, port)


def test_dockerfile_copies_existing_files_to_where_compose_expects_them():
    for source, _ in _copies():
        assert (ROOT / source).exists(), source
    env = _dockerfile_env()
    copies = dict(_copies())
    assert copies["deploy/dagster.yaml"] == f"{env['DAGSTER_HOME']}/dagster.yaml"
    for name in ("webserver", "daemon"):
        command = SERVICES[name]["command"]
        assert command[command.index("-w") + 1] == copies["deploy/workspace.yaml"]
    assert env["REFLEXIO_LAKE"] == "/data/lake" == SERVICES["reflexio"]["environment"]["REFLEXIO_LAKE"]
    assert "USER reflexio" in DOCKERFILE  # never root at run time


def test_every_instance_variable_is_set_for_every_app_service_and_no_secret_is_literal():
    wanted = set(re.findall(r"\{env: (\w+)\}", (DEPLOY / "dagster.yaml").read_text()))
    assert wanted == {
        "DAGSTER_PG_HOST",
        "DAGSTER_PG_PORT",
        "DAGSTER_PG_USERNAME",
        "DAGSTER_PG_PASSWORD",
        "DAGSTER_PG_DB",
    }
    for name in APP_SERVICES:
        env = SERVICES[name]["environment"]
        assert wanted <= set(env), (name, wanted - set(env))
        assert env["DAGSTER_HOME"] == _dockerfile_env()["DAGSTER_HOME"]
        assert env["REFLEXIO_METADATA_PREVIEWS"] == "false", name  # no user data in the Postgres run storage
    env = SERVICES["reflexio"]["environment"]
    postgres = SERVICES["postgres"]["environment"]
    assert (env["DAGSTER_PG_HOST"], env["DAGSTER_PG_USERNAME"], env["DAGSTER_PG_DB"]) == (
        "postgres",
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_DB"],
    )
    # Secrets are interpolated from the caller's environment, required (`:?`) or empty, never written here.
    for value in (env["DAGSTER_PG_PASSWORD"], postgres["POSTGRES_PASSWORD"]):
        assert value.startswith("${DAGSTER_PG_PASSWORD:?")
    assert env["REFLEXIO_LLM_API_KEY"] == "${REFLEXIO_LLM_API_KEY:-}"


def test_workspace_points_at_the_code_location_service():
    (entry,) = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())["load_from"]
    grpc = entry["grpc_server"]
    command = SERVICES["code-location"]["command"]
    assert grpc["host"] == "code-location" and grpc["port"] == int(command[command.index("-p") + 1])
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert grpc["location_name"] == pyproject["tool"]["dagster"]["code_location_name"]
    assert command[command.index("-m") + 1] == pyproject["tool"]["dagster"]["module_name"]


def test_instance_config_is_valid_for_dagster():
    config, _ = dagster_instance_config(str(DEPLOY), "dagster.yaml")
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert config["run_launcher"]["class"] == "DefaultRunLauncher"
    assert config["storage"]["postgres"]["postgres_db"]["password"] == {"env": "DAGSTER_PG_PASSWORD"}


#: The (sub)command whose --help lists the flags each Dagster service passes.
DAGSTER_COMMANDS = {
    "code-location": ["dagster", "api", "grpc"],
    "webserver": ["dagster-webserver"],
    "daemon": ["dagster-daemon", "run"],
}


@pytest.mark.e2e
@pytest.mark.parametrize("service", sorted(DAGSTER_COMMANDS))
def test_dagster_commands_exist_and_accept_their_flags(service):
    command, prefix = SERVICES[service]["command"], DAGSTER_COMMANDS[service]
    assert command[: len(prefix)] == prefix
    executable = shutil.which(prefix[0], path=str(Path(sys.executable).parent))
    assert executable, f"{prefix[0]} is not installed by the project's dependencies"
    helptext = subprocess.run([executable, *prefix[1:], "--help"], capture_output=True, text=True, timeout=120).stdout
    for flag in (a for a in command[len(prefix) :] if a.startswith("-")):
        assert re.search(rf"(^|[\s,]){re.escape(flag)}\b", helptext), (service, flag)
    if "-m" in command:
        assert importlib.util.find_spec(command[command.index("-m") + 1]) is not None


def test_service_command_is_the_serving_module():
    command = SERVICES["reflexio"]["command"]
    assert command[:3] == ["python", "-m", "serving"]
    assert importlib.util.find_spec("serving.__main__") is not None
    healthcheck = SERVICES["reflexio"]["healthcheck"]["test"]
    assert healthcheck[:3] == ["CMD", "python", "deploy/readiness.py"] and (ROOT / healthcheck[2]).is_file()


def _readiness(url: str, lake: Path, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(DEPLOY / "readiness.py"), url],
        env=child_env(lake, home),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _wait_ready(url: str, lake: Path, home: Path, timeout_s: float = 30) -> subprocess.CompletedProcess:
    deadline = time.monotonic() + timeout_s
    while (done := _readiness(url, lake, home)).returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    return done


@pytest.mark.e2e
def test_readiness_means_the_published_index_is_loaded(tmp_path):
    lake = Lake.at(tmp_path / "lake")
    home = tmp_path / "dagster_home"
    with serve_app(create_app(Settings(lake=str(lake.root)))) as url:
        # Nothing published yet: ready, or no publish could ever reach the service and nothing would be learned.
        assert _readiness(url, lake.root, home).returncode == 0

        # CURRENT names a version the replica cannot load: it keeps answering, but gets no traffic.
        lake.index_root.mkdir(parents=True)
        (lake.index_root / "CURRENT").write_text("20260101T000000000000Z-abcdef\n")
        time.sleep(1.5)  # a few index polls
        missing = _readiness(url, lake.root, home)
        assert missing.returncode == 1 and "20260101T000000000000Z-abcdef" in missing.stderr

        rule = "always use us-west-2"
        doc = SearchDoc("user_playbook", "1", rule, {"content": rule}, user_id="u1")
        publish_index(lake.index_root, [doc], make_embedder())
        assert _wait_ready(url, lake.root, home).returncode == 0

    stopped = _readiness(url, lake.root, home)
    assert stopped.returncode == 1 and "does not answer" in stopped.stderr
