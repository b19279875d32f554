# `make test` and `make demo` do all the set-up themselves, so a fresh Debian 12 machine
# (python3 with venv, nothing else) needs no other step.

# Debian's own python3 where it has venv: built with PGO and LTO, it runs the daemon and its workers
# (Python) with a fifth less CPU per row than an interpreter built without them (pyenv's default),
# and it is what a Debian host runs them with (docs/design.md "Performance"). Else python3 on PATH.
PYTHON ?= $(shell /usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 && echo /usr/bin/python3 || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
MARIADB_JAR := /usr/share/java/mariadb-java-client.jar
MARIADB_PACKAGES := mariadb-server mariadb-client libmariadb-java
# MariaDB's own test suite: tests/ddl_corpus.py replays its DDL (`make corpus`, and a sample in `make test`).
MARIADB_TEST_SUITE := /usr/share/mysql/mysql-test/main
JAVA_PACKAGE := openjdk-17-jre-headless
# Root (as on CI) installs directly; anyone else goes through sudo.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
APT_GET := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: setup system-packages bytecode compiled dashboard spark-archive test test-long test-cluster lint demo chaos fuzz live-stories corpus bench-backfill bench-sysbench clean

setup: system-packages $(STAMP) spark-archive bytecode compiled

# mariadbd lives in /usr/sbin, which is not on a normal user's PATH: look there too.
# Debian's prometheus package (promtool, and the prometheus the alert tests start on a free port)
# starts a system Prometheus on :9090 where systemd runs: the tests need only its programs, so
# that service is stopped and kept from starting at boot.
system-packages:
	@missing=""; \
	if { ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; } \
	    || [ ! -f $(MARIADB_JAR) ]; then \
	  missing="$(MARIADB_PACKAGES)"; \
	fi; \
	if ! command -v java >/dev/null 2>&1; then missing="$$missing $(JAVA_PACKAGE)"; fi; \
	if [ ! -d $(MARIADB_TEST_SUITE) ]; then missing="$$missing mariadb-test"; fi; \
	if ! command -v openssl >/dev/null 2>&1; then missing="$$missing openssl"; fi; \
	if ! command -v pt-online-schema-change >/dev/null 2>&1; then missing="$$missing percona-toolkit"; fi; \
	if ! command -v promtool >/dev/null 2>&1; then missing="$$missing prometheus"; fi; \
	if ! command -v chromium >/dev/null 2>&1; then missing="$$missing chromium"; fi; \
	if ! command -v gcc >/dev/null 2>&1; then missing="$$missing gcc"; fi; \
	if ! command -v ip >/dev/null 2>&1; then missing="$$missing iproute2"; fi; \
	if [ ! -f "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then \
	  missing="$$missing python3-dev"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  $(APT_GET) update -q && $(APT_GET) install -y -q --no-install-recommends $$missing || exit 1; \
	fi; \
	case " $$missing " in *" prometheus "*) \
	  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then \
	    $(SUDO) systemctl disable --now prometheus.service >/dev/null 2>&1 || true; \
	  fi;; \
	esac

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the dependencies (pyproject.toml, constraints.txt) changed since the last
# install; constraints.txt pins every version, so every machine tests the same packages.
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Our modules compiled, as `pip install` compiles an installed package's: an editable install
# leaves them to be compiled at each import where PYTHONDONTWRITEBYTECODE is set (a daemon's
# start then spends a third of its time compiling: 0.9 s of CPU against 0.5). Incremental.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 lattice replicator

# The row path's modules compiled by Cython (replicator/compiled.py): a worker spends a quarter
# less CPU per event. Incremental (a module whose source is the one built is left as it is); an
# edited module runs as Python till this builds it again. About a minute for all of them.
compiled: $(STAMP)
	@$(BIN)/python -m replicator.compiled_build

# Spark's classes ready-made for the driver's JVM (replicator/spark/archive.py): a session
# starts in half the time. Built once per pyspark installation.
spark-archive: $(STAMP)
	@$(BIN)/python -m replicator.spark.archive_build --if-missing \
	  || echo "no Spark class archive: sessions start without it (slower)"

# Four workers, a test file each at a time: each worker has its own sandbox servers and
# SparkSession (session fixtures), and the tests wait on servers and daemons as much as they
# compute (2,975 tests: 14.2 min with three workers, 13.6 with four, 14.4 with six: the
# servers and daemons share the two cores then). Their temporary folders, the servers' data
# among them, are in /dev/shm where it is a tmpfs with room (tests/ram_dir.py): 3,314 tests
# in 12.7 min, against 15.3 min for 3,253 on the disk.
# The Spark cluster's tests are left to `make test-cluster`.
test: setup
	$(BIN)/ruff check .
	$(BIN)/pytest -n 4 --dist loadfile -m "not cluster and not long"

# The long tests (`long` marker: 40 s or more each, a shorter one of each kind in `make test`):
# Spark backfills and verifies, standby takeovers, kills at random moments; about 7 min.
test-long: setup
	$(BIN)/pytest -n 3 --dist loadfile -m "long and not cluster"

# Backfill and verify on a Spark standalone cluster (master, worker and each job's executors,
# JVMs of their own) started from pyspark for the run, and spark-submit against it; one test at
# a time: the worker has one core (2-4 min on two busy cores).
test-cluster: setup
	$(BIN)/pytest -m cluster

lint: $(STAMP)
	$(BIN)/ruff check .

# The Grafana dashboard is generated: after changing deploy/grafana/dashboard.py, write it again.
dashboard: $(STAMP)
	$(BIN)/python -m deploy.grafana.dashboard --write

demo: setup
	$(BIN)/shardmerge demo

# A long chaos run on a sandbox of its own: make chaos SEED=7 DURATION=600 KILLS=150 [ROW_EVENTS=1]
# [STANDBY=1: two daemons of the task, each kill to whichever runs it (docs/operations/high-availability.md)]
# [FAULTS=mix: a menu of faults instead of kills only, a standby running (tests/fault_menu.py)]
# [MEMBERS=3: the task run by members (issue 75), each kill to one of them]
# [PARTITIONS=1: with MEMBERS, each member on a test host; one strike in four cuts one off, then heals it]
SEED ?= $(shell date +%s)
DURATION ?= 240
KILLS ?=
chaos: setup
	$(BIN)/python -m tests.chaos --seed $(SEED) --duration $(DURATION) $(if $(KILLS),--kills $(KILLS)) \
	    $(if $(ROW_EVENTS),--row-events) $(if $(STANDBY),--standby) $(if $(FAULTS),--faults $(FAULTS)) \
	    $(if $(MEMBERS),--members $(MEMBERS)) $(if $(PARTITIONS),--partitions) $(if $(UPSTREAMS),--upstreams $(UPSTREAMS))

# The schema-story fuzzer of issue 12 on a sandbox of its own: make fuzz SEED=1 COUNT=10000 JOBS=2.
# Shrunk violations go to fuzz-out/ as scenario YAML; it prints the counts and stories/s.
COUNT ?= 1000
JOBS ?= 2
fuzz: setup
	$(BIN)/python -m tests.fuzz --seed $(SEED) --count $(COUNT) --jobs $(JOBS)

# The fuzzer's stories played by the live daemon (tests/live_stories.py), rows flowing and the daemon
# SIGKILLed, on a sandbox of its own: make live-stories SEED=5 COUNT=20 [KILLS=3] [MAX_STEPS=16]
# [UNFOLLOWED=0.06] (the chance a step's ALTER runs unfollowed, for the operator's ways out)
# (COUNT given on the command line; else 10 stories, not the fuzzer's 1000: a story takes 15-40 s).
# Failing stories go to live-out/ (story YAML and the daemon's log); replay one with
# `.venv/bin/python -m tests.live_stories --replay live-out/live-seedN.yaml`.
MAX_STEPS ?=
live-stories: setup
	$(BIN)/python -m tests.live_stories --seed $(SEED) --count $(if $(filter command line,$(origin COUNT)),$(COUNT),10) \
	    $(if $(KILLS),--kills $(KILLS)) $(if $(MAX_STEPS),--max-steps $(MAX_STEPS)) \
	    $(if $(UNFOLLOWED),--unfollowed $(UNFOLLOWED))

# The DDL of MariaDB's own test suite (mariadb-test) replayed on a sandbox of its own and through our
# model, statement by statement (tests/ddl_corpus.py): the counts per outcome, every differ and crash.
# Then the downstream side (tests/ddl_corpus_downstream.py): what our model follows, through the
# coordinator with one shard and two identical ones, its DDL run downstream (~5 min on 2 cores;
# UPSTREAM_ONLY=1 leaves it out, ~45 s).
corpus: setup
	$(BIN)/python -m tests.ddl_corpus $(if $(UPSTREAM_ONLY),--upstream-only)

# The backfill next to mydumper + myloader and mysqldump (bench/backfill.py), on a sandbox of its
# own: make bench-backfill ROWS=5000000 WORKERS=1,2. mydumper is installed for it.
ROWS ?= 1000000
bench-backfill: setup
	@command -v mydumper >/dev/null 2>&1 || { $(APT_GET) update -q && \
	  $(APT_GET) install -y -q --no-install-recommends mydumper; }
	$(BIN)/python bench/backfill.py --rows $(ROWS) $(if $(WORKERS),--workers $(WORKERS))

# sysbench on 4 shard schemas over 2 servers, merged by the daemon, next to a native multi-source
# replica on the same binlog span (bench/sysbench.py), on a sandbox of its own; sysbench is installed
# for it. Every variable is optional (the defaults are the full size: 250,000 rows a shard table,
# 60 s): make bench-sysbench TABLE_SIZE=20000 LOAD_TIME=15 THREADS=2 WORKLOAD=read_write TIMEOUT=120
# [LAG_TIME=30] [RATE=2000] [KEEP=1]. (LOAD_TIME, not TIME: make would take GNU time's TIME format
# from the environment.)
bench-sysbench: setup
	@command -v sysbench >/dev/null 2>&1 || { $(APT_GET) update -q && \
	  $(APT_GET) install -y -q --no-install-recommends sysbench; }
	$(BIN)/python bench/sysbench.py $(if $(TABLE_SIZE),--table-size $(TABLE_SIZE)) \
	    $(if $(THREADS),--threads $(THREADS)) $(if $(LOAD_TIME),--time $(LOAD_TIME)) \
	    $(if $(WORKLOAD),--workload $(WORKLOAD)) $(if $(TIMEOUT),--timeout $(TIMEOUT)) \
	    $(if $(LAG_TIME),--lag-time $(LAG_TIME)) $(if $(RATE),--rate $(RATE)) $(if $(KEEP),--keep)

# A sandbox left running would keep serving from deleted datadirs: stop it first.
clean:
	@if [ -f .sandbox/sandbox.json ] && [ -x $(BIN)/shardmerge ]; then \
	  $(BIN)/shardmerge sandbox down --dir .sandbox || true; \
	fi
	rm -rf $(VENV) .compiled .sandbox .pytest_cache .ruff_cache .hypothesis build *.egg-info \
	    spark-warehouse metastore_db derby.log
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
