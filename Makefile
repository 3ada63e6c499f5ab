# msgx — see README.md. `make run` and `make test` are the two set-up commands.

GO       ?= go
PGADMIN  ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export MSGX_STATE_DIR ?= $(CURDIR)/.state

.PHONY: run test bench services browser curl prometheus devdb demo samples build vet fuzz clean-state

## run: the gateway on the embedded defaults against the local databases
run: devdb
	MSGX_CUTOVER_WATERMARK=$${MSGX_CUTOVER_WATERMARK:-min} $(GO) run ./cmd/msgx run

## test: every test (real PostgreSQL, MariaDB and an in-process Kafka)
test: services browser curl prometheus
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

## bench: throughput, commit, memory and latency figures, printed as rows of docs/operations.md 11.1
## (about 30 min on a lightly loaded 2-core machine before group commits, far longer on a loaded one;
## MSGX_BENCH_MESSAGES=2000 MSGX_BENCH_LATENCY=5s for a quick check)
bench: services
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 120m ./bench/...

## services: start PostgreSQL and MariaDB if they are not running
services:
	@bash .ci/services.sh

## browser: install Chromium, which the status page's browser tests drive (Debian's chromium;
## apt-get as root, or through sudo), only when it is missing
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }
	@chromium --version 2>/dev/null

## curl: install curl, which the HTTPS tests drive against msgx as an operator would, only when it
## is missing
curl:
	@command -v curl >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y curl; }

## prometheus: install Prometheus and promtool, which the tests of deploy/ run (Debian's
## prometheus; its service is not started here), and systemd-analyze (Debian's systemd), only
## when one is missing; waits for another apt-get holding the dpkg lock
prometheus:
	@command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && command -v systemd-analyze >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends prometheus systemd; }
	@promtool --version 2>/dev/null | head -1

## devdb: create the local databases msgx uses for development (idempotent)
devdb: services
	@psql "$(PGADMIN)" -tAc "SELECT 1 FROM pg_database WHERE datname = 'msgx'" | grep -q 1 || psql "$(PGADMIN)" -qc "CREATE DATABASE msgx"
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
	$(GO) test ./processors/sis -run '^$$' -fuzz FuzzDecode -fuzztime 60s

## clean-state: forget the embedded Kafka's data and goka's local tables
clean-state:
	rm -rf $(MSGX_STATE_DIR)
