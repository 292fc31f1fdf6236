"""The real OpenClaw, installed from the npm registry for the tests: `openclaw_runtime` (session fixture).

    def test_x(openclaw_runtime, tmp_path):
        home = tmp_path / "openclaw"                      # OPENCLAW_HOME: config, state, sessions of this test
        openclaw_runtime.run(home, "plugins", "install", "--link", PLUGIN_DIR, "--force", "--accept-capabilities")

The release is pinned by `tests/support/openclaw/package-lock.json` (the whole dependency tree, `npm ci`), and
installed once per lockfile under `.cache/openclaw/` in the checkout (git-ignored), so reruns start at once.
`npm ci --ignore-scripts`: OpenClaw's install scripts only warn about the package manager and pre-build optional
bundled plugins, which the CLI does not need.

OpenClaw 2026.9.6 needs Node >= 24.16 (< 25) or >= 26.1 (it uses `node:sqlite`). A `node` on PATH that qualifies is
used; otherwise the official Node build published on the npm registry as `node-<os>-<cpu>` (NODE_VERSION) is
installed next to it, so a machine with an older Node (Debian's 20) still runs the real OpenClaw.

Without npm the tests skip, except under CI=true, where they fail: CI must run them.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from tests.support.prerequisites import INSTALL_TIMEOUT_S, run_install_step, skip_unless_ci

ROOT = Path(__file__).resolve().parents[2]
PINS = Path(__file__).resolve().with_name("openclaw")  # package.json + package-lock.json
CACHE = ROOT / ".cache" / "openclaw"
OPENCLAW_VERSION = "2026.9.6"
NODE_VERSION = "24.22.3"  # the Node 24 LTS build used when the machine's node is too old for OpenClaw


def _supported(version: str) -> bool:
    """Whether OpenClaw 2026.9.6 runs on this Node version (its `node-version.mjs`: >=24.16 <25 or >=26.1)."""
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version.strip())
    if not match:
        return False
    major, minor, _ = map(int, match.groups())
    return (major == 24 and minor >= 16) or (major == 26 and minor >= 1) or major > 26


@dataclass(frozen=True)
class OpenClawRuntime:
    """An installed OpenClaw: `run()` executes its CLI (`openclaw.mjs`) with `node` under an isolated home."""

    node: Path
    entry: Path

    @property
    def version(self) -> str:
        return OPENCLAW_VERSION

    def env(self, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of an OpenClaw process whose config and state live under `home` (OPENCLAW_HOME); the
        pinned node comes first on PATH, since OpenClaw starts node subprocesses of its own."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_")}
        env.update(
            OPENCLAW_HOME=str(home),
            NO_COLOR="1",
            FORCE_COLOR="0",
            PATH=f"{self.node.parent}{os.pathsep}{env.get('PATH', '')}",
        )
        env.update(extra or {})
        return env

    def run(
        self, home: Path, *args: str | Path, timeout: float = 600, env: dict[str, str] | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`openclaw ARGS...` with its config and state under `home`; raises with its output unless it exits 0."""
        home.mkdir(parents=True, exist_ok=True)
        argv = [str(self.node), str(self.entry), *map(str, args)]
        done = subprocess.run(argv, cwd=home, env=self.env(home, env), capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(
                f"openclaw {' '.join(map(str, args))} exited {done.returncode}\n"
                f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
            )
        return done


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        skip_unless_ci(
            "npm is not installed: the OpenClaw runtime tests install the real `openclaw` package from the "
            "npm registry (install Node.js and npm, e.g. `apt-get install npm`)"
        )
    return npm


def _npm_run(npm: str, args: Sequence[str], cwd: Path) -> None:
    run_install_step([npm, *args], cwd, npm_config_update_notifier="false")


def _install_openclaw(npm: str) -> Path:
    """`npm ci` of the pinned tree into the cache (once per lockfile); the path of `openclaw.mjs`."""
    lock = (PINS / "package-lock.json").read_bytes()
    target = CACHE / f"openclaw-{OPENCLAW_VERSION}-{hashlib.sha256(lock).hexdigest()[:12]}"
    entry = target / "node_modules" / "openclaw" / "openclaw.mjs"
    marker = target / ".installed"
    if not marker.exists():
        if target.exists():
            shutil.rmtree(target)  # a half-finished install
        target.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(PINS / name, target / name)
        _npm_run(npm, ["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], target)
        if not entry.is_file():
            raise RuntimeError(f"npm ci finished but {entry} is missing")
        marker.write_text(OPENCLAW_VERSION)
    return entry


def _node_version(node: str | Path) -> str:
    try:
        return subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError:
        return ""


def _install_node(npm: str) -> Path:
    """A node OpenClaw supports: the one on PATH if it qualifies, else NODE_VERSION from the npm registry."""
    system = shutil.which("node")
    if system and _supported(_node_version(system)):
        return Path(system)
    os_name = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system())
    cpu = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    if os_name is None or cpu is None:
        raise RuntimeError(
            f"OpenClaw needs Node >= 24.16 and there is no npm build of Node for "
            f"{platform.system()}/{platform.machine()}: install Node 24 or 26"
        )
    package = f"node-{os_name}-{cpu}"
    target = CACHE / f"{package}-{NODE_VERSION}"
    node = target / "node_modules" / package / "bin" / "node"
    if not (target / ".installed").exists():
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        (target / "package.json").write_text('{"name": "reflexio-openclaw-node", "private": true}\n')
        _npm_run(
            npm,
            [
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--no-save",
                "--loglevel=error",
                f"{package}@{NODE_VERSION}",
            ],
            target,
        )
        if not _supported(_node_version(node)):
            raise RuntimeError(f"{node} does not run, or is not Node {NODE_VERSION}")
        (target / ".installed").write_text(NODE_VERSION)
    return node


def install_runtime() -> OpenClawRuntime:
    """Install (or reuse) the pinned OpenClaw and a Node it runs on; skips (fails under CI=true) without npm."""
    npm = _npm()
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CACHE / ".install.lock"), timeout=INSTALL_TIMEOUT_S):  # parallel sessions install once
        entry = _install_openclaw(npm)
        node = _install_node(npm)
    return OpenClawRuntime(node=node, entry=entry)


@pytest.fixture(scope="session")
def openclaw_runtime(tmp_path_factory: pytest.TempPathFactory) -> OpenClawRuntime:
    """The real OpenClaw CLI (pinned release), installed from the npm registry on first use."""
    runtime = install_runtime()
    done = runtime.run(tmp_path_factory.mktemp("openclaw-version"), "--version", timeout=300)
    assert f"OpenClaw {OPENCLAW_VERSION}" in done.stdout, done.stdout + done.stderr
    return runtime
