# pykraft — every target does its own setup: a fresh machine needs only python3 (>= 3.11) and make.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA_DIR ?= ./data

.PHONY: install bytecode run test lint java browser format proto bench bench-scale bench-peers bench-kafka soak fuzz clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pykraft needs Python >= 3.11, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,audit]'
	touch $(STAMP)

install: $(STAMP)

## The product's modules compiled to bytecode, as pip compiles a package it installs: the editable install's
## sources are otherwise compiled again at every process start wherever PYTHONDONTWRITEBYTECODE is set (here
## `pykraft topics --help`: 0.88-1.24 s uncompiled, 0.42-0.58 s compiled). Only what changed is compiled again.
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j 0 quorum controller broker pykraft audit

## make run — the product's main job: a local cluster (3 controllers, 6 brokers over 3 racks) on loopback,
## running in the background; then a demo topic is created and described.
run: $(STAMP) bytecode
	$(VENV)/bin/pykraft cluster up --data-dir $(DATA_DIR)
	@BOOT=$$($(VENV)/bin/pykraft cluster bootstrap --data-dir $(DATA_DIR)) && \
	$(VENV)/bin/pykraft topics --bootstrap-server $$BOOT --create --topic demo --partitions 6 \
		--replication-factor 3 --config retention.ms=86400000 --if-not-exists && \
	$(VENV)/bin/pykraft topics --bootstrap-server $$BOOT --describe --topic demo && \
	echo && echo "The cluster keeps running. Stop it with: $(VENV)/bin/pykraft cluster down --data-dir $(DATA_DIR)"

## make test — lint, check the generated code, then the whole test suite (Spark tests need Java 17). Two workers,
## each taking a whole module at a time (--dist loadfile: a module's shared cluster or Spark session stays on one
## worker): most of a serial run's wall time is spent waiting on processes and timeouts, not on the CPU (a serial
## run here: 13 min 51 s wall, 8.5 CPU min). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: $(STAMP) bytecode lint java browser
	$(PY) scripts/gen_proto.py --check
	$(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

## Java 17 for Spark: installed with apt when no java is on PATH (and JAVA_HOME is unset)
java:
	@if [ -z "$$JAVA_HOME" ] && ! command -v java >/dev/null 2>&1; then \
		echo "Java not found: installing openjdk-17-jre-headless with apt"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	fi

## Chromium and its driver for the report's browser test: installed with apt when no chromium is on PATH
browser:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
		echo "Chromium not found: installing chromium and chromium-driver with apt"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

## make bench — benchmarks (not part of the tests; they print figures and ratios against raw baselines)
bench: $(STAMP) bytecode
	$(PY) benchmarks/log_append.py
	$(PY) benchmarks/raft_append.py
	$(PY) benchmarks/peer_wire.py
	$(PY) benchmarks/observer_linger.py
	$(PY) benchmarks/create_topics.py
	$(PY) benchmarks/audit_replay.py
	$(PY) benchmarks/file_removal.py

## make bench-scale — 3 controllers and 6 observer brokers at 2,000,000 partitions: creation, memory, restarts,
## snapshots under load, failover, snapshot transfer, idle retention (long; `benchmarks/scale.py --quick`: ~3 min)
bench-scale: $(STAMP) bytecode
	$(PY) benchmarks/scale.py

## make bench-peers — pykraft's quorum beside a 3-member etcd in the same run: sequential commit latency, throughput
## at 64/256 in flight (and a bare grpc.aio echo), kill -9 and SIGSTOP failover (~5 min; `--quick`: ~1 min).
## etcd comes from Debian's etcd-server, installed with apt when no etcd is on PATH.
bench-peers: $(STAMP) bytecode
	@if ! command -v etcd >/dev/null 2>&1; then \
		echo "etcd not found: installing etcd-server with apt"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq etcd-server >/dev/null; \
	fi
	$(PY) benchmarks/peers.py

## make bench-kafka — CreateTopics through the controllers' Kafka listener beside gRPC on one fresh 3-controller
## cluster: pykraft's AdminClient, confluent-kafka's (librdkafka) and raw frames, 1 and 16 callers, 1 and 100 topics
## per request, rounds alternating; topics/s, Kafka/gRPC ratios, the active controller's CPU seconds (~3 min;
## `benchmarks/kafka_listener.py --quick`: ~35 s)
bench-kafka: $(STAMP) bytecode
	$(PY) benchmarks/kafka_listener.py

## make soak — a long simulation soak (SEEDS=10000 by default)
SEEDS ?= 10000
soak: $(STAMP)
	$(PY) -m quorum.sim --seeds $(SEEDS) --steps 5000
	$(PY) -m quorum.sim --seeds $$(( $(SEEDS) / 5 )) --steps 5000 --voters 5

## make fuzz — the hostile-input fuzz tests with the long budget: FUZZ_COUNT payloads per public gRPC method and
## peer messages (100,000 by default); FUZZ_SEED=N replays a run (each prints its seed)
FUZZ_COUNT ?= 100000
fuzz: $(STAMP)
	PYKRAFT_FUZZ_COUNT=$(FUZZ_COUNT) PYKRAFT_FUZZ_SEED=$(FUZZ_SEED) $(VENV)/bin/pytest -q -s -p no:logging \
		tests/hostile/test_fuzz_grpc.py tests/hostile/test_fuzz_broker_listener.py

## make proto — regenerate the gRPC code from proto/
proto: $(STAMP)
	$(PY) scripts/gen_proto.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info
