# msgx — see README.md. `make run` and `make test` are the two set-up commands.

GO       ?= go
PGADMIN  ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export MSGX_STATE_DIR ?= $(CURDIR)/.state

.PHONY: run test bench bench-million faults services kafka kafka-cluster kafka-stop kafkactl devdb demo samples build vet fuzz clean-state

## run: the gateway on the embedded defaults against the local databases
run: devdb
	MSGX_CUTOVER_WATERMARK=$${MSGX_CUTOVER_WATERMARK:-min} $(GO) run ./cmd/msgx run

## test: every test (real PostgreSQL, MariaDB and Apache Kafka; the in-process kfake where a test says so)
test: services
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

## bench: throughput, commit, memory and latency figures, each on the embedded Kafka (kfake) and on
## one Apache Kafka node this machine starts (MSGX_KAFKA_BROKERS: that Kafka instead), printed as the
## table of docs/benchmarks.md; MSGX_BENCH_RUNS=3 repeats the backlogs and the latency and prints
## medians (about 15 min on a quiet 2-core machine, three runs about 30 min, far longer on a loaded
## one; MSGX_BENCH_MESSAGES=2000 MSGX_BENCH_LATENCY=5s for a quick check)
bench: services
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 180m ./bench/...

## bench-million: a million-message backlog and its rebuild on Apache Kafka, beside a 50,000 one
## (docs/benchmarks.md; about 15 min; MSGX_BENCH_MILLION=5000 MSGX_BENCH_MESSAGES=2000 for a quick check)
bench-million: services
	MSGX_BENCH_MILLION=$${MSGX_BENCH_MILLION:-1} $(GO) test -count=1 -run '^$$' -bench 'Million' -benchtime 1x -timeout 180m ./bench/...

## faults: the fault campaign on a three-node Apache Kafka — every disturbance, each also with msgx
## killed -9 in it, and mixed at random (cmd/msgx/fault_test.go; about 40 minutes) — and its table
faults: services
	@mkdir -p $(MSGX_STATE_DIR)
	MSGX_FAULTS=all MSGX_FAULTS_OUT=$(MSGX_STATE_DIR)/faults.md $(GO) test -count=1 -run '^TestFaultCampaign$$' -timeout 150m ./cmd/msgx
	@cat $(MSGX_STATE_DIR)/faults.md

## services: install (Debian's packages, when missing), configure for local development and start
## PostgreSQL and MariaDB; install curl, kcat, Chromium, Prometheus/promtool and systemd-analyze,
## which the tests drive (.ci/services.sh)
services:
	@bash .ci/services.sh

KAFKACTL = $(MSGX_STATE_DIR)/kafka-real/kafkactl

## kafka: one Apache Kafka node (KRaft, broker + controller, fetched from Maven Central by
## internal/testenv/kafka/pom.xml) on 127.0.0.1:19092, in the background
kafka: kafkactl
	@$(KAFKACTL) start

## kafka-cluster: three Apache Kafka nodes on 127.0.0.1:19092,19093,19094 (replication 3,
## min.insync.replicas 2, unclean leader election off), in the background
kafka-cluster: kafkactl
	@$(KAFKACTL) start -nodes 3

## kafka-stop: stop what make kafka or make kafka-cluster started (their data stays)
kafka-stop: kafkactl
	@$(KAFKACTL) stop

kafkactl:
	@$(GO) build -o $(KAFKACTL) ./internal/testenv/kafka

## devdb: create the local databases msgx uses for development (idempotent): PostgreSQL's msgx, or
## the database MSGX_PG_DSN names (one per Kafka cluster: a database is bound to its cluster)
devdb: services
	@db=$$(printf '%s' "$${MSGX_PG_DSN:-/msgx}" | sed -E 's#^.*/([^/?]+)([?].*)?$$#\1#'); \
	psql "$(PGADMIN)" -tAc "SELECT 1 FROM pg_database WHERE datname = '$$db'" | grep -q 1 || psql "$(PGADMIN)" -qc "CREATE DATABASE \"$$db\""
	@mariadb -uroot -h127.0.0.1 -e "CREATE DATABASE IF NOT EXISTS aodbinterface CHARACTER SET utf8mb4"
	@mariadb -uroot -h127.0.0.1 aodbinterface < internal/testenv/inbox.sql

## demo: insert a coherent sample day into the local inbox (run it while `make run` runs)
demo: devdb
	@mariadb -uroot -h127.0.0.1 aodbinterface < testdata/demo.sql
	@echo "inserted testdata/demo.sql (13 messages); watch them: go run ./cmd/msgx status, go run ./cmd/msgx trace --flid 15"

## samples: insert every SIS sample of testdata/sis-samples, each with its own SEQN (see its README)
samples: devdb
	$(GO) run ./cmd/msgx samples

build:
	$(GO) build -o bin/msgx ./cmd/msgx

vet:
	$(GO) vet ./...

## fuzz: run the SIS decoder fuzzer for a minute
fuzz:
	$(GO) test ./tables/sis -run '^$$' -fuzz FuzzDecode -fuzztime 60s

## clean-state: forget the embedded Kafka's data, goka's local tables and make kafka's data
## (stop make kafka first)
clean-state:
	rm -rf $(MSGX_STATE_DIR)
