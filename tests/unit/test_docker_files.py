"""The docker deployment (docker/), checked without a Docker engine, since none runs on CI:
compose.yaml parsed with PyYAML and checked for structure, the Dockerfile's instructions parsed
and checked against the repo, and docker/task.yaml loaded with the real config loader. Where the
docker CLI and its compose plugin are installed, `docker compose config -q` checks the file too.
No image is built and no container is started."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from replicator.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "docker"
COMPOSE_FILE = DOCKER_DIR / "compose.yaml"
DOCKERFILE = DOCKER_DIR / "Dockerfile"
TASK_FILE = DOCKER_DIR / "task.yaml"
DOCKERIGNORE = REPO / ".dockerignore"

CONFIG_PATH = "/etc/shardmerge/task.yaml"
SPARK_MASTER_URL = "spark://spark-master:7077"
MYSQL_SERVICES = ("upstream1", "upstream2", "downstream")
UPSTREAMS = ("upstream1", "upstream2")
SHARDMERGE_SERVICES = ("shardmerge", "backfill", "verify", "jdbc-jar", "shardctl")
SPARK_JOBS = ("backfill", "verify")  # one-shot drivers of a job on the Spark cluster
EXPECTED_SERVICES = {
    "upstream1",
    "upstream2",
    "downstream",
    "shardmerge",
    "jdbc-jar",
    "spark-master",
    "spark-worker",
    "backfill",
    "verify",
    "shardctl",
}
PROFILES = {"backfill": ["backfill"], "verify": ["verify"], "shardctl": ["ops"]}  # services only a profile starts
# A compose variable reference, the whole value: ${NAME}, ${NAME:?message}, ${NAME-default}...
VAR_REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?(?P<arg>[^}]*)\}")
SECRET_KEY = re.compile(r"PASS|PWD|SECRET|TOKEN|CREDENTIAL|PRIVATE_KEY", re.IGNORECASE)
FAKE_ENV = {
    "UPSTREAM1_PASSWORD": "p1",
    "UPSTREAM2_PASSWORD": "p2",
    "DOWNSTREAM_PASSWORD": "p3",
    "SHARDMERGE_ADMIN_TOKEN": "t1",
}
PASSWORD_ENV = {k for k in FAKE_ENV if k.endswith("_PASSWORD")}


# -- helpers ---------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping, as compose does; PyYAML alone
    would keep the last one and hide the first. Keys brought in by `<<: *anchor` may be
    overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: Path) -> Any:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # a SafeLoader subclass


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = load_yaml(COMPOSE_FILE)
    assert isinstance(data, dict), "compose.yaml must be a mapping"
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services = compose.get("services")
    assert isinstance(services, dict) and services, "compose.yaml has no services"
    return services


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped (also inside a continued
    instruction, as Docker does), backslash continuations joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        pending = ""
    assert not pending, f"the Dockerfile ends inside a continued instruction: {pending!r}"
    return instructions


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def command_list(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def mysqld_options(service: dict[str, Any]) -> dict[str, str]:
    options = {}
    for arg in command_list(service):
        assert arg.startswith("--"), f"not a mysqld option: {arg!r}"
        name, _, value = arg[2:].partition("=")
        options[name.replace("_", "-")] = value
    return options


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.partition("=")[::2] for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: {"condition": "service_started"} for name in deps}
    return deps


def volume_mounts(service: dict[str, Any]) -> list[tuple[str, str, bool, str]]:
    """(source, target, read_only, type) of each mount; type is volume or bind."""
    mounts = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            source, target = entry.get("source", ""), entry["target"]
            read_only = bool(entry.get("read_only"))
            kind = entry.get("type", "volume")
        else:
            parts = entry.split(":")
            source, target = parts[0], parts[1]
            read_only = len(parts) > 2 and "ro" in parts[2].split(",")
            kind = "bind" if source.startswith((".", "/", "~", "$")) else "volume"
        mounts.append((source, target, read_only, kind))
    return mounts


def published_ports(service: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    """(host_ip, host_port, container_port) of each published port."""
    ports = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            ports.append((entry.get("host_ip"), str(entry.get("published", "")), str(entry["target"])))
            continue
        parts = str(entry).split(":")
        if len(parts) == 3:
            ports.append((parts[0], parts[1], parts[2]))
        elif len(parts) == 2:
            ports.append((None, parts[0], parts[1]))
        else:
            ports.append((None, "", parts[0]))
    return ports


def variable_default(value: str) -> str:
    """The default of a ${NAME:-default} reference (what compose uses when NAME is unset)."""
    match = VAR_REFERENCE.fullmatch(value)
    assert match and match["op"] in (":-", "-"), f"{value!r} is not a ${{NAME:-default}} reference"
    return match["arg"]


def dockerignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.lstrip().startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves `path` (or a folder above it) out of the build context. An
    approximation of Docker's matcher: no `!` exceptions, `**/` matches any depth or none."""
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        assert not pattern.startswith("!"), "exceptions are not understood by this check"
        candidates = [pattern, pattern[3:]] if pattern.startswith("**/") else [pattern]
        if any(fnmatch.fnmatchcase(p, c) for p in prefixes for c in candidates):
            return True
        if pattern.startswith("**/") and any(fnmatch.fnmatchcase(part, pattern[3:]) for part in parts):
            return True
    return False


# -- compose.yaml ----------------------------------------------------------------------------


def test_compose_has_the_expected_services(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == EXPECTED_SERVICES
    for name in MYSQL_SERVICES:
        assert str(services[name]["image"]).startswith("mysql:8.0"), name


def test_images_are_pinned_to_a_release(services: dict[str, dict[str, Any]], dockerfile: list[tuple[str, str]]) -> None:
    """Reproducible: every image names its release (major.minor.patch), never a moving tag."""
    images = [str(s["image"]) for s in services.values() if "build" not in s]
    images += [args for kw, args in dockerfile if kw == "FROM"]
    for image in images:
        resolved = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", image)  # a variable's default
        tag = resolved.rsplit(":", 1)[1] if ":" in resolved else "latest"
        assert re.match(r"\d+\.\d+\.\d+", tag), f"{image}: pin a release"
    constraints = (REPO / "constraints.txt").read_text().splitlines()
    pinned = [line for line in constraints if line and not line.startswith("#")]
    assert pinned and all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[^=\s]+", line) for line in pinned), pinned


def test_the_daemon_is_healthy_when_ready_and_the_console_waits_for_it(
    services: dict[str, dict[str, Any]], dockerfile: list[tuple[str, str]]
) -> None:
    health = ["shardctl", "--config", CONFIG_PATH, "health"]
    checks = [args for kw, args in dockerfile if kw == "HEALTHCHECK"]
    assert len(checks) == 1 and exec_form(checks[0].split("CMD", 1)[1]) == health
    assert services["shardmerge"]["healthcheck"]["test"] == ["CMD", *health]
    console = services["shardctl"]
    assert depends_on(console) == {"shardmerge": {"condition": "service_healthy"}}
    assert console["entrypoint"][:3] == ["shardctl", "--addr", "http://shardmerge:8080"]
    assert VAR_REFERENCE.fullmatch(environment(console)["SHARDCTL_TOKEN"])["name"] == "SHARDMERGE_ADMIN_TOKEN"


def test_upstreams_write_row_binlogs_with_full_row_metadata(services: dict[str, dict[str, Any]]) -> None:
    for name in UPSTREAMS:
        options = mysqld_options(services[name])
        assert options.get("log-bin"), f"{name}: binary log not enabled"
        assert options.get("binlog-format", "").upper() == "ROW", name
        assert options.get("binlog-row-image", "").upper() == "FULL", name
        assert options.get("binlog-row-metadata", "").upper() == "FULL", name
        assert options.get("gtid-mode", "").upper() == "ON", name
        assert options.get("enforce-gtid-consistency", "").upper() == "ON", name


def test_mysql_server_ids_are_distinct_and_not_the_task_replica_ids(
    services: dict[str, dict[str, Any]],
) -> None:
    server_ids = {}
    for name in MYSQL_SERVICES:
        server_id = mysqld_options(services[name]).get("server-id")
        assert server_id and server_id.isdigit() and int(server_id) > 0, f"{name}: no --server-id"
        server_ids[name] = int(server_id)
    assert len(set(server_ids.values())) == len(server_ids), server_ids
    config = load_config(TASK_FILE, environ=FAKE_ENV)
    replica_ids = {source.server_id for source in config.sources}
    assert not replica_ids & set(server_ids.values()), (replica_ids, server_ids)


def test_mysql_services_have_a_mysqladmin_ping_healthcheck(services: dict[str, dict[str, Any]]) -> None:
    for name in MYSQL_SERVICES:
        check = services[name].get("healthcheck") or {}
        test = check.get("test")
        text = test if isinstance(test, str) else " ".join(test or [])
        assert "mysqladmin ping" in text, name
        assert "127.0.0.1" in text, f"{name}: ping over TCP, or the init-time server passes it"
        assert check.get("retries", 0) > 0, name


def test_every_depends_on_names_an_existing_service(services: dict[str, dict[str, Any]]) -> None:
    seen = 0
    for name, service in services.items():
        for dependency, spec in depends_on(service).items():
            seen += 1
            assert dependency in services, f"{name} depends on unknown service {dependency!r}"
            assert dependency != name
            assert spec.get("condition", "service_started") in (
                "service_started",
                "service_healthy",
                "service_completed_successfully",
            )
            if spec.get("condition") == "service_healthy":
                assert "healthcheck" in services[dependency], f"{dependency} has no healthcheck"
            # A service that is always started cannot wait for one that only a profile starts.
            if not service.get("profiles"):
                assert not services[dependency].get("profiles"), f"{name} -> {dependency}"
    assert seen, "no depends_on at all"


def test_shardmerge_waits_for_healthy_databases_and_restarts(services: dict[str, dict[str, Any]]) -> None:
    daemon = services["shardmerge"]
    deps = depends_on(daemon)
    for name in MYSQL_SERVICES:
        assert deps.get(name, {}).get("condition") == "service_healthy", name
    assert daemon.get("restart") == "unless-stopped"
    assert command_list(daemon) == ["run", "--config", CONFIG_PATH, "--log-format", "json"]


def test_named_volumes_are_declared_and_used(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, service in services.items():
        for source, _target, _ro, kind in volume_mounts(service):
            if kind == "volume" and source:
                assert source in declared, f"{name} mounts undeclared volume {source!r}"
                used.add(source)
    assert declared == used, f"declared but unused: {declared - used}"
    for name in MYSQL_SERVICES:
        targets = {target: kind for _s, target, _ro, kind in volume_mounts(services[name])}
        assert targets.get("/var/lib/mysql") == "volume", f"{name}: data not in a named volume"


def test_bind_mounts_exist_and_the_task_is_mounted_read_only(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for source, _target, _ro, kind in volume_mounts(service):
            if kind == "bind":
                assert (COMPOSE_FILE.parent / source).exists(), f"{name}: {source} does not exist"
    for name in ("shardmerge", "backfill"):
        mounts = {target: (source, ro) for source, target, ro, _kind in volume_mounts(services[name])}
        assert mounts.get(CONFIG_PATH) == ("./task.yaml", True), name


def test_no_literal_passwords(services: dict[str, dict[str, Any]]) -> None:
    checked = 0
    for name, service in services.items():
        for key, value in environment(service).items():
            if not SECRET_KEY.search(key):
                continue
            checked += 1
            match = VAR_REFERENCE.fullmatch(value)
            assert match, f"{name}: {key} is not a ${{VAR}} reference"
            # No default secret either: a missing variable must stop compose, not fill in one.
            assert match["op"] in (None, ":?", "?"), f"{name}: {key} has a default"
    assert checked >= 3 + 2 * len(PASSWORD_ENV) + 1  # + the daemon's admin token
    # Nor on a command line (`-pSECRET`, `--password=SECRET`), e.g. in a healthcheck.
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    assert not re.search(r"(\s-p|--password[= ])['\"]?[^\s'\"$]", text), "a password on a command line"


def test_task_password_variables_are_set_for_every_shardmerge_process(
    services: dict[str, dict[str, Any]],
) -> None:
    data = load_yaml(TASK_FILE)
    names = {s["password_env"] for s in data["sources"]} | {data["target"]["password_env"]}
    assert names == PASSWORD_ENV
    for service in ("shardmerge", *SPARK_JOBS):
        env = environment(services[service])
        missing = names - set(env)
        assert not missing, f"{service} lacks {missing}"
        for variable in names:
            reference = VAR_REFERENCE.fullmatch(env[variable])
            assert reference and reference["name"] == "MYSQL_ROOT_PASSWORD", f"{service}: {variable}"


def test_published_ports_are_bound_to_loopback(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for host_ip, host_port, container_port in published_ports(service):
            assert host_ip == "127.0.0.1", f"{name}: {host_port}:{container_port} open on every interface"
    assert ("127.0.0.1", "8080", "8080") in published_ports(services["shardmerge"])
    for name in MYSQL_SERVICES:
        assert not published_ports(services[name]), f"{name} need not be reachable from the host"


def test_shardmerge_image_is_built_from_the_dockerfile(services: dict[str, dict[str, Any]]) -> None:
    images = set()
    for name in SHARDMERGE_SERVICES:
        build = services[name].get("build")
        assert isinstance(build, dict), f"{name}: no build section"
        assert build.get("context") == ".."
        assert build.get("dockerfile") == "docker/Dockerfile"
        context = (COMPOSE_FILE.parent / build["context"]).resolve()
        assert context == REPO
        assert (context / build["dockerfile"]).is_file()
        images.add(services[name].get("image"))
    assert len(images) == 1 and None not in images, f"one image for every shardmerge service: {images}"


def test_spark_jobs_run_only_in_their_profile_on_the_cluster(services: dict[str, dict[str, Any]]) -> None:
    for name in SPARK_JOBS:
        job = services[name]
        assert job.get("profiles") == [name]
        assert command_list(job) == [name, "--config", CONFIG_PATH, "--spark-master", SPARK_MASTER_URL]
        assert job.get("restart") in (None, "no")
        assert {"spark-master", "spark-worker"} <= set(depends_on(job))
        assert "/usr/share/java/mariadb-java-client.jar" in environment(job).get("PYSPARK_SUBMIT_ARGS", "")
        assert (CONFIG_PATH, True) in {(t, ro) for _s, t, ro, _kind in volume_mounts(job)}, name
    for name, service in services.items():
        assert service.get("profiles") == PROFILES.get(name), f"{name} should start with a plain `up`"


def test_spark_master_and_worker(services: dict[str, dict[str, Any]]) -> None:
    master, worker = services["spark-master"], services["spark-worker"]
    assert master["image"] == worker["image"]
    assert str(master["image"]).startswith("apache/spark:")
    master_cmd, worker_cmd = command_list(master), command_list(worker)
    assert master_cmd[:2] == ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.master.Master"]
    assert worker_cmd[:3] == [
        "/opt/spark/bin/spark-class",
        "org.apache.spark.deploy.worker.Worker",
        SPARK_MASTER_URL,
    ]
    # The URL the worker and the backfill use reaches the master's service and RPC port.
    host, port = SPARK_MASTER_URL.removeprefix("spark://").split(":")
    assert host in services
    assert master_cmd[master_cmd.index("--port") + 1] == port


def test_spark_worker_gets_the_jdbc_driver(services: dict[str, dict[str, Any]]) -> None:
    jar = "mariadb-java-client.jar"
    copier = services["jdbc-jar"]
    entrypoint = copier["entrypoint"]
    assert entrypoint[0] == "cp" and entrypoint[1] == f"/usr/share/java/{jar}"
    destination = Path(entrypoint[-1])
    written = {s: t for s, t, _ro, kind in volume_mounts(copier) if kind == "volume"}
    (volume,) = (s for s, t in written.items() if destination.is_relative_to(t))
    worker = services["spark-worker"]
    worker_mounts = {s: t for s, t, _ro, kind in volume_mounts(worker)}
    assert volume in worker_mounts, "the worker does not mount the volume the jar is copied to"
    in_worker = str(Path(worker_mounts[volume]) / destination.relative_to(written[volume]))
    assert environment(worker).get("SPARK_DIST_CLASSPATH") == in_worker
    assert depends_on(worker)["jdbc-jar"]["condition"] == "service_completed_successfully"
    # The copier writes as the image's user, into the directory the Dockerfile made for it.
    assert "user" not in copier
    assert written[volume] in DOCKERFILE.read_text(encoding="utf-8")


def test_spark_version_is_the_same_for_cluster_and_driver(
    services: dict[str, dict[str, Any]], dockerfile: list[tuple[str, str]]
) -> None:
    build_arg = services["shardmerge"]["build"]["args"]["SPARK_VERSION"]
    version = variable_default(build_arg)
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    image = services["spark-master"]["image"]
    assert image.startswith("apache/spark:${SPARK_VERSION:-" + version + "}-"), image
    args = dict(a.partition("=")[::2] for kw, a in dockerfile if kw == "ARG")
    assert args.get("SPARK_VERSION") == version, "the Dockerfile's default differs from compose's"
    runs = " ".join(a for kw, a in dockerfile if kw == "RUN")
    assert '"pyspark==${SPARK_VERSION}"' in runs


# -- Dockerfile ------------------------------------------------------------------------------


def test_dockerfile_starts_from_python_slim(dockerfile: list[tuple[str, str]]) -> None:
    keywords = [kw for kw, _ in dockerfile]
    first_non_arg = next(kw for kw in keywords if kw != "ARG")
    assert first_non_arg == "FROM" and keywords[0] in ("FROM", "ARG")
    froms = [args for kw, args in dockerfile if kw == "FROM"]
    assert len(froms) == 1 and re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", froms[0])


def test_dockerfile_entrypoint_and_cmd(dockerfile: list[tuple[str, str]]) -> None:
    entrypoints = [exec_form(a) for kw, a in dockerfile if kw == "ENTRYPOINT"]
    cmds = [exec_form(a) for kw, a in dockerfile if kw == "CMD"]
    assert entrypoints[-1:] == [["shardmerge"]]
    assert cmds[-1:] == [["run", "--config", CONFIG_PATH]]


def test_dockerfile_copy_sources_exist_in_the_context(dockerfile: list[tuple[str, str]]) -> None:
    patterns = dockerignore_patterns()
    copied = []
    for keyword, args in dockerfile:
        if keyword not in ("COPY", "ADD"):
            continue
        assert keyword == "COPY", "ADD fetches and unpacks; COPY is enough"
        words = exec_form(args) if args.startswith("[") else shlex.split(args)
        flags = [w for w in words if w.startswith("--")]
        if any(f.startswith("--from=") for f in flags):
            continue
        *sources, _destination = [w for w in words if not w.startswith("--")]
        for source in sources:
            path = source.rstrip("/")
            assert (REPO / path).exists(), f"COPY {source}: not in the build context {REPO}"
            assert not ignored(path, patterns), f"COPY {source}: excluded by .dockerignore"
            copied.append(path)
    # Everything `pip install .` needs: the metadata (with its readme) and both packages.
    assert {"pyproject.toml", "README.md", "lattice", "replicator"} <= set(copied)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'readme = "README.md"' in pyproject or "README.md" not in copied


def test_dockerfile_installs_java_jdbc_and_client_cleanly(dockerfile: list[tuple[str, str]]) -> None:
    runs = [args for kw, args in dockerfile if kw == "RUN"]
    (apt,) = [r for r in runs if "apt-get install" in r]
    assert "--no-install-recommends" in apt
    assert "rm -rf /var/lib/apt/lists/*" in apt, "the apt lists must be removed in the same layer"
    assert re.search(r"\b(default-jre-headless|openjdk-17-jre-headless)\b", apt)
    assert re.search(r"\blibmariadb-java\b", apt)
    assert re.search(r"\bmariadb-client\b", apt)
    (pip,) = [r for r in runs if "pip install" in r]
    assert re.search(r"pip install --no-cache-dir -c constraints\.txt \.(\s|$)", pip)


def test_dockerfile_runs_as_a_non_root_user(dockerfile: list[tuple[str, str]]) -> None:
    users = [args for kw, args in dockerfile if kw == "USER"]
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    created = " ".join(args for kw, args in dockerfile if kw == "RUN")
    assert re.search(rf"useradd\b[^&]*\b{re.escape(user)}\b", created), f"user {user} is never created"


def test_dockerignore_keeps_local_state_out(dockerfile: list[tuple[str, str]]) -> None:
    patterns = dockerignore_patterns()
    for path in (
        ".venv",
        ".sandbox",
        ".git",
        "spark-warehouse",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        "replicator/__pycache__",
        "shardmerge.egg-info",
        ".compiled",  # (this machine's extensions: `make compiled`)
    ):
        assert ignored(path, patterns), f"{path} is sent to the build context"
    for path in ("pyproject.toml", "README.md", "lattice/join.py", "replicator/cli/shardmerge.py"):
        assert not ignored(path, patterns), f"{path} is left out of the build context"


# -- task.yaml -------------------------------------------------------------------------------


def test_task_config_loads_and_routes_the_order_shards() -> None:
    config = load_config(TASK_FILE, environ=FAKE_ENV)
    assert [s.id for s in config.sources] == ["upstream1", "upstream2"]
    assert [s.password for s in config.sources] == ["p1", "p2"]
    assert config.target.password == "p3"
    assert {s.host for s in config.sources} | {config.target.host} == set(MYSQL_SERVICES)
    (route,) = config.routes
    assert route.target == "shop.orders"
    assert route.extract_columns == {"source": "_source", "schema": "_schema", "table": "_table"}
    assert route.matches("shop_01", "orders_001")
    assert route.matches("shop_16", "orders_064")
    assert not route.matches("shop_01", "customers")
    assert not route.matches("crm", "orders_001")


def test_task_config_needs_the_password_variables() -> None:
    for name in FAKE_ENV:
        environ = {k: v for k, v in FAKE_ENV.items() if k != name}
        with pytest.raises(ConfigError, match=name):
            load_config(TASK_FILE, environ=environ)


def test_readme_says_how_to_run_it() -> None:
    readme = (DOCKER_DIR / "README.md").read_text(encoding="utf-8")
    assert "MYSQL_ROOT_PASSWORD" in readme
    assert "docker compose -f docker/compose.yaml up -d" in readme
    assert "--profile backfill" in readme
    assert "logs" in readme
    assert "without" in readme and "Docker engine" in readme


# -- docker compose config, where the CLI is installed ---------------------------------------


@pytest.mark.skipif(
    shutil.which("docker") is None,
    reason="the docker binary is not on PATH, so `docker compose config` cannot run here",
)
def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    assert docker
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("the docker binary is on PATH but its compose plugin is not installed")
    env = {**os.environ, "MYSQL_ROOT_PASSWORD": "not-a-real-password"}
    command = [docker, "compose", "-f", str(COMPOSE_FILE), "--profile", "backfill", "config", "-q"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr
    # Without the password, compose must refuse instead of starting servers with none.
    env.pop("MYSQL_ROOT_PASSWORD")
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert result.returncode != 0
    assert "MYSQL_ROOT_PASSWORD" in result.stderr
