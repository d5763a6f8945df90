# headwater: `make run` starts a single-node broker, `make lint` checks style, types and
# layers, `make test` runs the lint and then the whole suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Editable install in "compat" mode: a .pth file puts the project root on sys.path, so
# Spark's data source lookup (pkgutil.iter_modules in every Python worker) finds the
# pyspark_headwater module; the default finder-based editable install hides it.
EDITABLE := --config-settings editable_mode=compat
# Spark's Python workers must run the venv's interpreter (pyarrow, the connector).
SPARK_ENV := PYSPARK_PYTHON=$(abspath $(BIN)/python) PYSPARK_DRIVER_PYTHON=$(abspath $(BIN)/python)

.PHONY: run cluster test test-shared test-cluster iceberg-spark lint bench bench-perf bench-spark bench-share soak fuzz chaos chaos-short iceberg-campaign clean java kcat kafka rabbitmq postgres chromium

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(EDITABLE) -e '.[test,spark]'
	touch $(STAMP)

# Java 17 for PySpark (the Spark connector tests) and Apache Kafka, with javac for the
# Kafka Streams application the tests compile (tests/support/streams/): the JDK
# (openjdk-17-jdk-headless, which brings the JRE) is installed from Debian when neither
# `javac` on PATH nor /usr/lib/jvm has a 17; silent when it is already there.
java:
	@javac -version 2>&1 | grep -q '^javac 17\.' \
	  || ls /usr/lib/jvm/java-17-openjdk-*/bin/javac >/dev/null 2>&1 \
	  || { echo "installing Java 17 (openjdk-17-jdk-headless)"; \
	       SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	       $$SUDO apt-get update -qq \
	       && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	            openjdk-17-jdk-headless >/dev/null; }

# kcat (Debian's, on an older librdkafka than confluent-kafka's) for the client tests.
kcat:
	@command -v kcat >/dev/null \
	  || { echo "installing kcat"; \
	       SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	       $$SUDO apt-get update -qq \
	       && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }

# Chromium and ChromeDriver (Debian's) for the web console's browser tests (Selenium,
# tests/integration/test_console.py); headless, with a fresh profile per test module.
chromium:
	@{ test -x /usr/bin/chromium && test -x /usr/bin/chromedriver; } \
	  || { echo "installing chromium and chromium-driver"; \
	       SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	       $$SUDO apt-get update -qq \
	       && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	            chromium chromium-driver >/dev/null; }

# PostgreSQL (Debian's) for the shared log's tests, which start their own private servers
# (initdb + pg_ctl in a temp dir); the package's system service is never used.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	  || { echo "installing postgresql"; \
	       SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	       $$SUDO apt-get update -qq \
	       && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	            postgresql >/dev/null; }

# versitygw (Apache-2.0; one Go binary serving a directory over the S3 API, with
# conditional PUT) for the shared log's tests and `make cluster`, into .tools/bin/.
VERSITYGW := .tools/bin/versitygw
$(VERSITYGW):
	@command -v go >/dev/null || { echo "versitygw needs Go (go.dev) on PATH" >&2; exit 1; }
	GOBIN=$(abspath .tools/bin) GOFLAGS=-mod=mod go install \
	  github.com/versity/versitygw/cmd/versitygw@v1.8.0

# Toxiproxy, the fault campaign's network faults (tests/support/toxiproxy.py).
TOXIPROXY := .tools/toxiproxy/server
$(TOXIPROXY):
	@command -v go >/dev/null || { echo "toxiproxy needs Go (go.dev) on PATH" >&2; exit 1; }
	GOBIN=$(abspath .tools/toxiproxy) GOFLAGS=-mod=mod go install \
	  github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0

# RabbitMQ (Debian's rabbitmq-server 3.10) for bench/share_bench.py's queue comparison; the
# bench starts its own private node, so the package's system service is never used.
rabbitmq:
	@test -x /usr/lib/rabbitmq/bin/rabbitmq-server \
	  || { echo "installing rabbitmq-server"; \
	       SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	       $$SUDO apt-get update -qq \
	       && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	            rabbitmq-server >/dev/null; }

# Apache Kafka 4.4.0 (broker, tools, Java clients) into .kafka/lib/, kafka-metadata-shell
# (4.3.1's, the newest served) into .kafka/shell/, Spark's Kafka connector into
# .kafka/spark/, Kafka Streams (kafka-streams, rocksdbjni) into .kafka/streams/ and
# Iceberg's Spark runtime with the catalogs' JDBC drivers into .kafka/iceberg/, as
# listed in kafka-ref/ (docs/compatibility.md: "Apache Kafka beside headwater"). The
# stamp makes a second run a no-op that needs no network.
KAFKA_STAMP := .kafka/.fetched
$(KAFKA_STAMP): kafka-ref/pom.xml kafka-ref/kafka/pom.xml kafka-ref/shell/pom.xml \
                kafka-ref/spark/pom.xml kafka-ref/streams/pom.xml kafka-ref/iceberg/pom.xml
	@command -v mvn >/dev/null \
	  || { echo "installing maven"; \
	       SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	       $$SUDO apt-get update -qq \
	       && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }
	rm -rf .kafka/lib .kafka/shell .kafka/spark .kafka/streams .kafka/iceberg
	mvn -q -B -f kafka-ref/pom.xml dependency:copy-dependencies
	touch $@

kafka: java $(KAFKA_STAMP)

# pyspark 4.1 beside the project's 4.3, for Spark reading topics' Iceberg tables: Iceberg
# publishes no Spark runtime newer than 4.1's (kafka-ref/iceberg/pom.xml). Installed with
# pip --target; a script runs on it with PYTHONPATH=$(ICEBERG_SPARK) (docs/iceberg.md).
ICEBERG_SPARK := .tools/pyspark-4.1
$(ICEBERG_SPARK)/.installed: $(STAMP)
	rm -rf $(ICEBERG_SPARK)
	$(BIN)/pip install -q --target $(ICEBERG_SPARK) pyspark==4.1.1
	touch $@

iceberg-spark: kafka $(ICEBERG_SPARK)/.installed

# The web console runs beside the broker (a child process) unless CONSOLE is empty:
# `make run CONSOLE=` for the broker alone, `make run CONSOLE=127.0.0.1:8081` elsewhere.
CONSOLE ?= 127.0.0.1:8080
run: $(STAMP)
	@$(if $(CONSOLE),echo "headwater console: http://$(CONSOLE)/ (docs/console.md)",true)
	$(BIN)/headwater serve --listen 127.0.0.1:9092 --data-dir ./data \
	  $(if $(CONSOLE),--console-listen $(CONSOLE))

# Three brokers on the shared log with a private PostgreSQL and versitygw, on loopback
# (127.0.0.1:19091-19093, data under ./cluster, afresh each time); Ctrl-C stops them all.
# SECURE=1: SASL_SSL client listeners, SCRAM between the brokers, an authorizer, TLS to
# PostgreSQL and versitygw, random passwords from ./cluster/secrets (examples/cluster/run.py).
cluster: $(STAMP) postgres $(VERSITYGW)
	$(BIN)/python examples/cluster/run.py ./cluster $(if $(SECURE),--secure)

# The lint runs first: a layer broken or a type wrong fails the suite before it starts.
# Two workers (pytest-xdist), each taking whole files (module-scoped brokers stay shared):
# the tests mostly wait on sockets and JVM start-ups, so 2 cores run two files at once.
# Files are handed out in the order given: the long Spark modules first and the quick
# unit tests last, so that neither worker runs a long file alone at the end.
test: $(STAMP) java kcat kafka iceberg-spark postgres chromium $(VERSITYGW)
	$(MAKE) --no-print-directory lint
	$(SPARK_ENV) $(BIN)/python -m pytest -q -m "not slow and not chaos" -n 2 --dist loadfile \
	  --durations=15 tests/spark tests/integration tests/fuzz tests/unit

# The client-facing integration tests again, every broker fixture three brokers on one
# shared log (tests/support/broker_trio.py: a private PostgreSQL and versitygw per
# worker, clients bootstrapping on one broker; docs/shared-log.md), and the cluster
# campaigns (`cluster_campaign`: coordinators killed under load, Kafka's tools and a Spark
# streaming query on clusters of their own); then the short seeded fault campaign alone
# (`chaos-short`: beside another worker its readers once did not finish in time,
# docs/operations.md). Its own target, which .ci/run calls after `make test`.
# `pytest --storage=shared` runs the same tests on one broker of the shared log.
test-shared: test-cluster
	$(MAKE) --no-print-directory chaos-short

test-cluster: $(STAMP) java kcat kafka iceberg-spark postgres chromium $(VERSITYGW) $(TOXIPROXY)
	$(SPARK_ENV) $(BIN)/python -m pytest -q -m "not slow and not chaos" -n 2 --dist loadfile \
	  --durations=25 --storage=cluster -rs tests/integration tests/spark/test_cluster.py \
	  tests/spark/test_table_history.py

# ruff, mypy (strict on all of headwater; not yet the Spark connector) and import-linter's
# layer contracts; all three configured in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check headwater pyspark_headwater tests bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

# headwater, Apache Kafka 4.4.0 and Tansu with librdkafka; Kafka's own perf tools against
# headwater and Kafka; format("headwater") against Spark's format("kafka") (bench/README.md).
bench: $(STAMP) kafka
	$(BIN)/pip install -q $(EDITABLE) -e '.[bench]'
	$(BIN)/python bench/broker_bench.py

bench-perf: $(STAMP) kafka
	$(BIN)/pip install -q $(EDITABLE) -e '.[bench]'
	$(BIN)/python bench/perf_tools_bench.py

# Share groups: headwater, Kafka 4.4.0's share groups and RabbitMQ (bench/README.md).
bench-share: $(STAMP) kafka rabbitmq
	$(BIN)/pip install -q $(EDITABLE) -e '.[bench]'
	$(BIN)/python bench/share_bench.py

bench-spark: $(STAMP) java kafka
	$(SPARK_ENV) $(BIN)/python bench/spark_bench.py --share

soak: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests

# The long fuzzing campaign (make test runs a short one): FUZZ_REQUESTS mutated requests
# from seed FUZZ_SEED against one broker, a canary client beside it (tests/fuzz).
FUZZ_REQUESTS ?= 1000000
FUZZ_SEED ?= 16
fuzz: $(STAMP)
	HEADWATER_FUZZ_REQUESTS=$(FUZZ_REQUESTS) HEADWATER_FUZZ_SEED=$(FUZZ_SEED) \
	  $(BIN)/python -m pytest -q -s tests/fuzz

# The long fault campaign (make test-shared runs a short seeded one): three brokers on a
# private PostgreSQL and versitygw, CHAOS_SECONDS of faults from seed CHAOS_SEED, then the
# checker over the whole history (tests/chaos/campaign.py; the history in chaos-history.jsonl).
CHAOS_SECONDS ?= 1800
CHAOS_SEED ?= 33
chaos: $(STAMP) postgres $(VERSITYGW) $(TOXIPROXY)
	$(BIN)/python -m tests.chaos.campaign --seed $(CHAOS_SEED) --duration $(CHAOS_SECONDS) \
	  --history chaos-history.jsonl

# The short seeded campaign (75 s of faults, then the planted bug) under pytest, alone, as
# make test-shared runs it last.
chaos-short: $(STAMP) postgres $(VERSITYGW) $(TOXIPROXY)
	$(BIN)/python -m pytest -q -s -m chaos --storage=shared tests/integration/test_chaos_campaign.py

# Issue 38's million: ICEBERG_RECORDS records in transactions (one in five aborted) into
# a 6-partition topic's Iceberg table on three brokers, one killed -9 while the tables are
# committed, then the table compared row by row with the topic's read_committed records
# (tests/integration/test_shared_iceberg.py; make test-cluster runs it with 30,000).
ICEBERG_RECORDS ?= 1000000
iceberg-campaign: $(STAMP) java iceberg-spark postgres $(VERSITYGW)
	HEADWATER_ICEBERG_RECORDS=$(ICEBERG_RECORDS) $(BIN)/python -m pytest -q -s \
	  --storage=cluster tests/integration/test_shared_iceberg.py

clean:
	rm -rf $(VENV) data cluster .kafka
