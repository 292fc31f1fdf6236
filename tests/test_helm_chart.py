"""deploy/helm/reflexio renders, and every manifest it renders validates against the Kubernetes schemas.

Rendering is `helm template`: Helm's own Go engine through helm-python-sdk (a dev dependency; neither PyPI nor
Debian ships the helm CLI) running the install action in client-only dry-run mode, which is what `helm template`
runs, or the `helm` CLI on PATH where that package has no wheel. Both run in a child process, so Helm's Go runtime
never shares this process. Validation is kubernetes-validate's bundled JSON schemas, strict (an unknown field is an
error), offline, for the oldest and the newest Kubernetes version the chart targets. The run pods the K8sRunLauncher
would create are built with dagster-k8s's own job builder from the rendered dagster.yaml and validated the same way.

Without a renderer or the validator the tests skip with what to install; under CI (CI=true) they fail instead.
"""

from __future__ import annotations

import base64
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path
from unittest import mock

import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "reflexio"
COMPOSE = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text()
RELEASE, NAMESPACE = "reflexio", "reflexio"
#: The oldest Kubernetes minor the chart supports (nothing newer than its APIs is used) and the newest schema set.
KUBE_FLOOR = "1.29"

SHARDED_SECRETS = ("test-pg-password-value", "AKIATESTKEYID0000", "test-secret-access-key-value")
CASES: dict[str, dict] = {
    # Everything in-chart: PostgreSQL StatefulSet, the lake on a ReadWriteMany claim, one serving group.
    "default": {},
    # Two replica groups holding two of four shards each, an external PostgreSQL, the lake on S3 with static keys.
    "sharded-s3-external-pg": {
        "image": {"repository": "registry.example.com/reflexio-lake", "tag": "0.1.0"},
        "lake": {
            "uri": "s3://reflexio-lake/prod",
            "s3": {
                "region": "eu-west-1",
                "endpointUrl": "https://s3.example.com",
                "accessKeyId": SHARDED_SECRETS[1],
                "secretAccessKey": SHARDED_SECRETS[2],
            },
        },
        "postgresql": {
            "enabled": False,
            "host": "dagster-db.internal",
            "password": SHARDED_SECRETS[0],
            "params": {"sslmode": "require"},
        },
        "extraEnvSecrets": ["reflexio-llm"],
        "serving": {
            "shardCount": 4,
            "replicaGroups": [
                {"name": "a", "replicas": 2, "shards": [0, 1]},
                {"name": "b", "replicas": 3, "shards": [2, 3]},
            ],
        },
    },
    # Secrets, the claim and the ServiceAccount managed outside the chart.
    "existing-objects": {
        "serviceAccount": {"create": False, "name": "dagster-runs"},
        "imagePullSecrets": [{"name": "regcred"}],
        "lake": {"persistence": {"existingClaim": "shared-lake"}},
        "postgresql": {"existingSecret": "dagster-pg"},
        "extraEnv": {"REFLEXIO_LLM_MODEL": "openai/gpt-4o-mini"},
        "extraEnvSecrets": ["reflexio-llm"],
    },
}
#: Objects the "existing-objects" and "sharded" values name but the chart does not create.
EXTERNAL = {
    "Secret": {"dagster-pg", "reflexio-llm", "regcred"},
    "PersistentVolumeClaim": {"shared-lake"},
    "ServiceAccount": {"dagster-runs"},
}

# Runs in a child process: Helm's engine (a Go shared library) renders or lints the chart.
_HELM_PYTHON = r"""
import json, sys
import helm_python
request = json.load(sys.stdin)
try:
    if request["action"] == "lint":
        print(json.dumps(helm_python.lint(request["chart"], request["values"], strict=True)))
    else:
        with helm_python.Config(namespace=request["namespace"], storage_driver="memory") as config:
            release = config.install(request["chart"], request["release"], request["values"], dry_run="client",
                                     namespace=request["namespace"])
        sys.stdout.write(release["manifest"])
except helm_python.HelmError as exc:
    sys.exit(f"helm: {exc}")
"""


class RenderError(Exception):
    """The chart did not render (a template failed, or a `fail`/`required` of the chart fired)."""


def _missing(what: str) -> None:
    message = f"{what}: install the dev dependencies (`make install`, i.e. pip install -e '.[dev]')"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must run this test; {message}")
    pytest.skip(message)


def _renderer() -> str:
    """helm-python-sdk (pinned in the dev dependencies, so every machine renders with the same Helm), else a `helm`
    CLI on PATH (where no wheel exists)."""
    if importlib.util.find_spec("helm_python") is not None:
        return "helm_python"
    if shutil.which("helm"):
        return "helm"
    _missing("no Helm to render the chart (neither `helm` on PATH nor helm-python-sdk)")
    raise AssertionError("unreachable")


def _kv():
    if importlib.util.find_spec("kubernetes_validate") is None:
        _missing("kubernetes-validate (the Kubernetes schemas) is not installed")
    import kubernetes_validate

    return kubernetes_validate


def _helm_python(request: dict) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", _HELM_PYTHON], input=json.dumps(request), capture_output=True, text=True, timeout=120
    )
    if proc.returncode:
        raise RenderError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "helm failed")
    return proc.stdout


def _helm_cli(args: list[str], values: dict, tmp: Path) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    values_file = tmp / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    proc = subprocess.run(["helm", *args, "-f", str(values_file)], capture_output=True, text=True, timeout=120)
    if proc.returncode:
        raise RenderError(proc.stderr.strip())
    return proc.stdout


def render_manifest(values: dict, tmp: Path) -> str:
    """`helm template reflexio deploy/helm/reflexio -n reflexio -f values` as text."""
    if _renderer() == "helm":
        return _helm_cli(["template", RELEASE, str(CHART), "--namespace", NAMESPACE], values, tmp)
    return _helm_python(
        {"action": "render", "chart": str(CHART), "release": RELEASE, "namespace": NAMESPACE, "values": values}
    )


@cache
def rendered(case: str) -> tuple[dict, ...]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        text = render_manifest(CASES[case], Path(tmp))
    return tuple(doc for doc in yaml.safe_load_all(text) if doc)


def objects(docs, kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def workloads(docs) -> dict[str, dict]:
    return {**objects(docs, "Deployment"), **objects(docs, "StatefulSet")}


def component(docs, name: str) -> list[dict]:
    return [
        doc
        for doc in workloads(docs).values()
        if doc["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == name
    ]


def one(docs, name: str) -> dict:
    found = component(docs, name)
    assert len(found) == 1, (name, [d["metadata"]["name"] for d in found])
    return found[0]


def container(workload: dict) -> dict:
    (only,) = workload["spec"]["template"]["spec"]["containers"]
    return only


def env_of(workload: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container(workload).get("env", [])}


def instance_yaml(docs) -> dict:
    """The dagster.yaml the daemon loads: followed from its mount to the ConfigMap."""
    daemon = one(docs, "daemon")
    home = env_config(docs)["DAGSTER_HOME"]
    (mount,) = [m for m in container(daemon)["volumeMounts"] if m["mountPath"] == f"{home}/dagster.yaml"]
    (volume,) = [v for v in daemon["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    return yaml.safe_load(objects(docs, "ConfigMap")[volume["configMap"]["name"]]["data"][mount["subPath"]])


def env_config(docs) -> dict[str, str]:
    """The non-secret environment every app pod loads (the daemon's configMapRef)."""
    (ref,) = [src["configMapRef"]["name"] for src in container(one(docs, "daemon"))["envFrom"] if "configMapRef" in src]
    return objects(docs, "ConfigMap")[ref]["data"]


def secret_values(case: str) -> set[str]:
    """Every secret value of a case: the decoded data of each rendered Secret plus the values the case supplies."""
    secrets = objects(rendered(case), "Secret").values()
    found = {base64.b64decode(value).decode() for secret in secrets for value in secret.get("data", {}).values()}
    if case == "sharded-s3-external-pg":
        found |= set(SHARDED_SECRETS)
    return found


def k8s_run_job(docs) -> dict:
    """The Job the K8sRunLauncher of the rendered dagster.yaml creates for a run, as the API server receives it."""
    import kubernetes
    from dagster._config import process_config
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster_k8s import K8sRunLauncher
    from dagster_k8s.container_context import K8sContainerContext
    from dagster_k8s.job import construct_dagster_k8s_job

    launcher_config = instance_yaml(docs)["run_launcher"]
    checked = process_config(K8sRunLauncher.config_type(), launcher_config["config"])
    assert checked.success, checked.errors
    with mock.patch("dagster_k8s.launcher.load_kubernetes_config"):  # no cluster here; nothing else is stubbed
        launcher = K8sRunLauncher.from_config_value(None, checked.value)
    run = DagsterRun(job_name="learn_window", run_id="4c1f0ad2-9b7e-4d55-9a0e-0f5c3b1f2a77")
    context = K8sContainerContext.create_for_run(run, launcher, include_run_tags=True)
    image = env_of(one(docs, "code-location"))["DAGSTER_CURRENT_IMAGE"]["value"]
    job = construct_dagster_k8s_job(
        context.get_k8s_job_config(job_image=image, run_launcher=launcher),
        ["dagster", "api", "execute_run", "{}"],
        "dagster-run-4c1f0ad2",
        user_defined_k8s_config=context.run_k8s_config,
        component="run_worker",
    )
    return kubernetes.client.ApiClient().sanitize_for_serialization(job)


def validate_strict(doc: dict) -> None:
    kv = _kv()
    for version in (KUBE_FLOOR, kv.latest_version()):
        problem = None
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as exc:
            problem = f"invalid at /{'/'.join(str(p) for p in exc.path)}: {exc.message}"
        except kv.SchemaNotFoundError as exc:
            problem = exc.message
        if problem:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} (Kubernetes {version}): {problem}")


# --- the chart renders and every object is valid ---------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_chart_lints_strict(case, tmp_path):
    if _renderer() == "helm":
        _helm_cli(["lint", "--strict", str(CHART)], CASES[case], tmp_path)
        return
    report = json.loads(_helm_python({"action": "lint", "chart": str(CHART), "values": CASES[case]}))
    assert report["errors"] == []
    # Severity 2 = warning, 3 = error; `icon is recommended` (1, info) is the only message expected.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("case", CASES)
def test_every_rendered_manifest_validates_against_the_kubernetes_schemas(case):
    docs = rendered(case)
    names = [(doc["kind"], doc["metadata"]["name"]) for doc in docs]
    assert len(names) == len(set(names)), names
    expected = {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret", "Deployment", "Service"}
    expected -= {"ServiceAccount"} if case == "existing-objects" else set()
    expected -= {"Secret"} if case == "existing-objects" else set()
    assert expected <= {kind for kind, _ in names}
    for doc in docs:
        validate_strict(doc)


@pytest.mark.parametrize("case", CASES)
def test_run_pods_the_k8s_run_launcher_creates_are_valid_jobs(case):
    docs = rendered(case)
    job = k8s_run_job(docs)
    validate_strict(job)
    pod = job["spec"]["template"]["spec"]
    (run_container,) = pod["containers"]
    env = {item["name"]: item for item in run_container["env"]}
    assert env["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": pg_secret_name(docs),
        "key": "postgresql-password",
    }
    # The run pod gets the same environment and lake as the code location it was launched from.
    assert run_container["envFrom"] == container(one(docs, "code-location"))["envFrom"]
    code_location_mounts = {m["mountPath"] for m in container(one(docs, "code-location"))["volumeMounts"]}
    run_mounts = {m["mountPath"] for m in run_container["volumeMounts"]}
    assert run_mounts == code_location_mounts - {f"{env_config(docs)['DAGSTER_HOME']}/dagster.yaml"}
    assert pod["serviceAccountName"] == service_account_name(docs)
    assert pod["securityContext"]["runAsUser"] == 10001 and pod["securityContext"]["fsGroup"] == 10001


def _env_config_names(docs) -> set[str]:
    return {src["configMapRef"]["name"] for src in container(one(docs, "daemon"))["envFrom"] if "configMapRef" in src}


# --- the daemon runs every run as a Kubernetes Job ---------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_daemon_instance_uses_the_k8s_run_launcher_and_postgres(case, tmp_path):
    from dagster._core.instance.config import dagster_instance_config

    docs = rendered(case)
    instance = instance_yaml(docs)
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(instance))
    config, _ = dagster_instance_config(str(tmp_path), "dagster.yaml")  # Dagster's own schema check
    launcher = config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    assert importlib.util.find_spec(launcher["module"]), "dagster-k8s must be installed wherever the instance loads"
    settings = launcher["config"]
    assert settings["load_incluster_config"] is True
    assert settings["job_namespace"] == NAMESPACE
    assert settings["instance_config_map"] in objects(docs, "ConfigMap")
    assert settings["postgres_password_secret"] == pg_secret_name(docs)
    assert settings["service_account_name"] == service_account_name(docs)
    assert set(settings["env_config_maps"]) == _env_config_names(docs)
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert config["storage"]["postgres"]["postgres_db"]["password"] == {"env": "DAGSTER_PG_PASSWORD"}
    # The same queue limits as deploy/dagster.yaml: one run per ingest window.
    compose_instance = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())
    assert config["concurrency"] == compose_instance["concurrency"]


def test_run_launcher_service_account_may_manage_jobs_and_read_pod_logs():
    docs = rendered("default")
    sa = service_account_name(docs)
    assert sa in objects(docs, "ServiceAccount")
    (binding,) = objects(docs, "RoleBinding").values()
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    role = objects(docs, "Role")[binding["roleRef"]["name"]]
    grants = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert {"create", "get", "list", "watch", "delete"} <= grants[("batch", "jobs")]
    assert {"get", "list", "watch"} <= grants[("", "pods")]
    assert "get" in grants[("", "pods/log")]
    # Only the processes that launch or terminate runs get an API token; the service and the code location use the
    # ServiceAccount for a pod role (S3) only.
    for workload in (one(docs, "daemon"), one(docs, "webserver")):
        assert workload["spec"]["template"]["spec"]["serviceAccountName"] == sa
        assert workload["spec"]["template"]["spec"].get("automountServiceAccountToken", True) is True
    for workload in (*component(docs, "serving"), one(docs, "code-location")):
        assert workload["spec"]["template"]["spec"]["serviceAccountName"] == sa
        assert workload["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


# --- serving replicas and their shards ---------------------------------------------------------------------------


def test_each_serving_group_carries_its_shards():
    docs = rendered("sharded-s3-external-pg")
    groups = {
        d["spec"]["template"]["metadata"]["labels"]["reflexio.io/replica-group"]: d for d in component(docs, "serving")
    }
    assert {name: env_of(d)["REFLEXIO_INDEX_SHARDS"]["value"] for name, d in groups.items()} == {"a": "0,1", "b": "2,3"}
    assert {env_of(d)["REFLEXIO_INDEX_SHARD_COUNT"]["value"] for d in groups.values()} == {"4"}
    assert {name: d["spec"]["replicas"] for name, d in groups.items()} == {"a": 2, "b": 3}
    services = objects(docs, "Service")
    for name, deployment in groups.items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        selector = services[f"reflexio-serving-{name}"]["spec"]["selector"]
        assert selector.items() <= labels.items()
        others = [d for other, d in groups.items() if other != name]
        assert all(not selector.items() <= d["spec"]["template"]["metadata"]["labels"].items() for d in others)
    everyone = services["reflexio-serving"]["spec"]["selector"]
    assert all(everyone.items() <= d["spec"]["template"]["metadata"]["labels"].items() for d in groups.values())
    (default_group,) = component(rendered("default"), "serving")
    assert env_of(default_group)["REFLEXIO_INDEX_SHARDS"]["value"] == "0"


@pytest.mark.parametrize(
    ("groups", "error"),
    [
        ([{"name": "a", "shards": [0, 1]}, {"name": "b", "shards": [1, 2, 3]}], "shard 1 is assigned to two groups"),
        ([{"name": "a", "shards": [0, 1]}, {"name": "b", "shards": [2]}], "shard 3 is served by no group"),
        ([{"name": "a", "shards": [0, 1, 2, 3, 4]}], "shard 4 is outside 0..3"),
        ([{"name": "a", "shards": []}], 'group "a" lists no shards'),
        ([{"name": "a", "shards": [0, 1]}, {"name": "a", "shards": [2, 3]}], 'group "a" appears twice'),
        ([{"name": "Group_A", "shards": [0, 1, 2, 3]}], "must be a DNS label"),
    ],
)
def test_invalid_shard_assignments_do_not_render(groups, error, tmp_path):
    with pytest.raises(RenderError, match=re.escape(error)):
        render_manifest({"serving": {"shardCount": 4, "replicaGroups": groups}}, tmp_path)


def test_serving_probes_use_the_readiness_script_and_the_health_route():
    from serving.routers.health import router

    assert "/health" in {route.path for route in router.routes}
    assert "WORKDIR /opt/reflexio" in DOCKERFILE and "COPY deploy/readiness.py deploy/readiness.py" in DOCKERFILE
    for deployment in component(rendered("sharded-s3-external-pg"), "serving"):
        serving = container(deployment)
        port = serving["ports"][0]["containerPort"]
        assert serving["readinessProbe"]["exec"]["command"] == [
            "python",
            "deploy/readiness.py",
            f"http://127.0.0.1:{port}",
        ]
        assert serving["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
        assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 30


def test_webserver_probe_route_exists():
    import dagster_webserver.webserver as webserver

    assert 'Route("/server_info"' in inspect.getsource(webserver)
    probe = container(one(rendered("default"), "webserver"))["readinessProbe"]
    assert probe["httpGet"] == {"path": "/server_info", "port": "http"}


# --- secrets -----------------------------------------------------------------------------------------------------


def pg_secret_name(docs) -> str:
    ref = env_of(one(docs, "daemon"))["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"]
    return ref["name"]


def service_account_name(docs) -> str:
    return one(docs, "daemon")["spec"]["template"]["spec"]["serviceAccountName"]


@pytest.mark.parametrize("case", CASES)
def test_no_secret_value_outside_secrets(case):
    docs = rendered(case)
    secrets = secret_values(case)
    # Only the case whose Secrets all exist outside the chart has no secret value in the release.
    assert bool(secrets) == (case != "existing-objects")
    for doc in docs:
        if doc["kind"] == "Secret":
            continue
        text = json.dumps(doc)
        leaked = [s for s in secrets if s in text]
        assert not leaked, f"{doc['kind']}/{doc['metadata']['name']} holds a secret value"
    for configmap in objects(docs, "ConfigMap").values():
        assert not any(re.search(r"PASSWORD|SECRET|API_KEY", key) for key in configmap["data"]), configmap["data"]


@pytest.mark.parametrize("case", CASES)
def test_postgres_password_comes_from_a_secret_ref(case):
    docs = rendered(case)
    name = pg_secret_name(docs)
    if case == "existing-objects":
        assert name == "dagster-pg" and name not in objects(docs, "Secret")
    else:
        assert "postgresql-password" in objects(docs, "Secret")[name]["data"]
    loads_instance = 0
    for workload in workloads(docs).values():
        env = env_of(workload)
        for variable in ("DAGSTER_PG_PASSWORD", "POSTGRES_PASSWORD"):
            if variable in env:
                assert "value" not in env[variable]
                assert env[variable]["valueFrom"]["secretKeyRef"] == {"name": name, "key": "postgresql-password"}
        volumes = workload["spec"]["template"]["spec"].get("volumes", [])
        if any(v.get("configMap", {}).get("name") == instance_config_map(docs) for v in volumes):
            loads_instance += 1
            assert "DAGSTER_PG_PASSWORD" in env, workload["metadata"]["name"]
    assert loads_instance == len(workloads(docs)) - len(objects(docs, "StatefulSet"))


def instance_config_map(docs) -> str:
    return instance_yaml(docs)["run_launcher"]["config"]["instance_config_map"]


@pytest.mark.parametrize("case", CASES)
def test_every_reference_resolves(case):
    """Each ConfigMap, Secret, claim and ServiceAccount a pod names is rendered, or named in the values as existing;
    each Service selects pods and targets a port they declare."""
    docs = rendered(case)
    known = {
        kind: set(objects(docs, kind)) | EXTERNAL.get(kind, set())
        for kind in ("ConfigMap", "Secret", "PersistentVolumeClaim", "ServiceAccount")
    }
    for workload in workloads(docs).values():
        pod = workload["spec"]["template"]["spec"]
        assert pod.get("serviceAccountName", "default") in known["ServiceAccount"] | {"default"}
        for volume in pod.get("volumes", []):
            if "configMap" in volume:
                assert volume["configMap"]["name"] in known["ConfigMap"]
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in known["PersistentVolumeClaim"]
        for pull in pod.get("imagePullSecrets", []):
            assert pull["name"] in known["Secret"]
        main = container(workload)
        for source in main.get("envFrom", []):
            if "configMapRef" in source:
                assert source["configMapRef"]["name"] in known["ConfigMap"]
            else:
                assert source["secretRef"]["name"] in known["Secret"]
        for item in main.get("env", []):
            if "secretKeyRef" in item.get("valueFrom", {}):
                assert item["valueFrom"]["secretKeyRef"]["name"] in known["Secret"]
        mounted = {m["name"] for m in main.get("volumeMounts", [])}
        claims = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
        assert mounted <= {v["name"] for v in pod.get("volumes", [])} | claims
    for service in objects(docs, "Service").values():
        selector = service["spec"]["selector"]
        targets = [
            w
            for w in workloads(docs).values()
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert targets, service["metadata"]["name"]
        for target in targets:
            names = {p["name"] for p in container(target).get("ports", [])}
            assert {p["targetPort"] for p in service["spec"]["ports"]} <= names


# --- the lake and PostgreSQL settings ----------------------------------------------------------------------------


def test_s3_lake_settings_reach_every_lake_process():
    docs = rendered("sharded-s3-external-pg")
    env = env_config(docs)
    assert env["REFLEXIO_LAKE"] == "s3://reflexio-lake/prod"
    assert env["AWS_REGION"] == "eu-west-1" and env["AWS_ENDPOINT_URL"] == "https://s3.example.com"
    assert env["REFLEXIO_CACHE_DIR"] == "/var/cache/reflexio"
    keys = objects(docs, "Secret")["reflexio-s3"]["data"]
    assert set(keys) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    assert base64.b64decode(keys["AWS_SECRET_ACCESS_KEY"]).decode() == SHARDED_SECRETS[2]
    assert not objects(docs, "PersistentVolumeClaim")
    for workload in (one(docs, "code-location"), *component(docs, "serving")):
        assert {"secretRef": {"name": "reflexio-s3"}} in container(workload)["envFrom"]
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        assert "lake" not in volumes and "emptyDir" in volumes["cache"]
        assert {"name": "cache", "mountPath": env["REFLEXIO_CACHE_DIR"]} in container(workload)["volumeMounts"]
    assert "reflexio-s3" in instance_yaml(docs)["run_launcher"]["config"]["env_secrets"]
    # The Dagster UI and the daemon never touch the lake: no lake credentials there.
    for workload in (one(docs, "webserver"), one(docs, "daemon")):
        assert {"secretRef": {"name": "reflexio-s3"}} not in container(workload)["envFrom"]


def test_local_lake_is_one_shared_claim():
    docs = rendered("default")
    env = env_config(docs)
    (claim,) = objects(docs, "PersistentVolumeClaim").values()
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    for workload in (one(docs, "code-location"), *component(docs, "serving")):
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        assert volumes["lake"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        assert {"name": "lake", "mountPath": env["REFLEXIO_LAKE"]} in container(workload)["volumeMounts"]
    existing = rendered("existing-objects")
    assert not objects(existing, "PersistentVolumeClaim")
    volumes = {v["name"]: v for v in one(existing, "code-location")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["lake"]["persistentVolumeClaim"]["claimName"] == "shared-lake"


def test_postgres_in_chart_or_external():
    docs = rendered("default")
    (statefulset,) = objects(docs, "StatefulSet").values()
    assert env_config(docs)["DAGSTER_PG_HOST"] in objects(docs, "Service")
    assert statefulset["spec"]["volumeClaimTemplates"]
    external = rendered("sharded-s3-external-pg")
    assert not objects(external, "StatefulSet")
    assert env_config(external)["DAGSTER_PG_HOST"] == "dagster-db.internal"
    assert instance_yaml(external)["storage"]["postgres"]["postgres_db"]["params"] == {"sslmode": "require"}


def test_a_secret_in_plain_extra_env_does_not_render(tmp_path):
    with pytest.raises(RenderError, match="extraEnv.OPENAI_API_KEY looks like a secret"):
        render_manifest({"extraEnv": {"OPENAI_API_KEY": "sk-not-here"}}, tmp_path)


def test_external_postgres_without_a_password_does_not_render(tmp_path):
    with pytest.raises(RenderError, match="external PostgreSQL needs postgresql.password"):
        render_manifest({"postgresql": {"enabled": False, "host": "db.internal"}}, tmp_path)


# --- agreement with the image and the compose file ---------------------------------------------------------------


def test_commands_image_and_versions_agree_with_compose_and_the_image():
    docs = rendered("default")
    services = COMPOSE["services"]
    for part, compose_name in {
        "code-location": "code-location",
        "webserver": "webserver",
        "daemon": "daemon",
        "serving": "reflexio",
    }.items():
        assert container(one(docs, part))["command"] == services[compose_name]["command"], part
    home = re.search(r"DAGSTER_HOME=(\S+)", DOCKERFILE).group(1)
    assert env_config(docs)["DAGSTER_HOME"] == home
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]
    assert container(one(docs, "daemon"))["image"] == f"reflexio-lake:{project['version']}"
    # The image installs the runtime dependencies only, and the daemon and webserver import the run launcher.
    assert any(dep.startswith("dagster-k8s") for dep in project["dependencies"])
    # The workspace the webserver and daemon load points at the code location's Service.
    workspace = yaml.safe_load(objects(docs, "ConfigMap")[instance_config_map(docs)]["data"]["workspace.yaml"])
    (server,) = [entry["grpc_server"] for entry in workspace["load_from"]]
    dagster_project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]
    assert server["location_name"] == dagster_project["code_location_name"]
    code_location = container(one(docs, "code-location"))["command"]
    assert code_location[code_location.index("-m") + 1] == dagster_project["module_name"]
    service = objects(docs, "Service")[server["host"]]
    assert service["spec"]["ports"][0]["port"] == server["port"]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "code-location"


def test_the_service_answers_its_own_service_names_and_the_configured_hosts(tmp_path):
    """In open mode the service refuses Host names it does not know (serving/hosts.py, DNS rebinding): the chart
    names every Service that reaches it, plus serving.allowedHosts, in REFLEXIO_ALLOWED_HOSTS."""
    from serving.hosts import host_allowed, normalise_pattern

    def hosts_of(docs) -> list[str]:
        (env,) = [c for c in objects(docs, "ConfigMap").values() if "REFLEXIO_ALLOWED_HOSTS" in c["data"]]
        return [normalise_pattern(h) for h in env["data"]["REFLEXIO_ALLOWED_HOSTS"].split(",")]

    allowed = hosts_of(rendered("sharded-s3-external-pg"))
    for name in (
        "reflexio-serving",
        "reflexio-serving-a",
        "reflexio-serving-b.reflexio",
        "reflexio-serving-a.reflexio.svc",
        "reflexio-serving.reflexio.svc.cluster.local",
    ):
        assert host_allowed(name, allowed), name
    assert not host_allowed("evil.example", allowed)
    text = render_manifest({"serving": {"allowedHosts": ["reflexio.example.com", "*.corp.example"]}}, tmp_path)
    custom = hosts_of(tuple(d for d in yaml.safe_load_all(text) if d))
    assert host_allowed("reflexio.example.com", custom) and host_allowed("api.corp.example", custom)
    assert host_allowed("reflexio-serving-main", custom)
