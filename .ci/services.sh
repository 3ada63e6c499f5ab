#!/usr/bin/env bash
# Installs, configures and starts what this project's tests and `make run`
# need on a machine that has none of it: Debian's PostgreSQL and MariaDB,
# curl, kcat, Chromium, Prometheus/promtool, systemd-analyze and python3 with
# venv. Idempotent
# and quiet when everything is there already; one line naming what failed
# otherwise.
#
# LOCAL DEVELOPMENT SERVICES ONLY. The access set here is for tests on a
# developer's or CI's own machine and must never be copied to a server:
#   - PostgreSQL trusts every local user on the socket and on 127.0.0.1
#     (no password), so the tests' postgres://postgres@127.0.0.1 works;
#   - MariaDB's root has no password on 127.0.0.1.
# Production provisioning (roles, grants, passwords) is in
# docs/operations.md, Provisioning (tested by cmd/msgx's TestProvisioning).
set -euo pipefail

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
fail() { echo "make services: $*" >&2; exit 1; }

# --- packages ------------------------------------------------------------
# One apt-get for everything missing: a fresh machine pays one index update.
want=()
command -v pg_ctlcluster >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || want+=(postgresql postgresql-contrib)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || want+=(mariadb-server)
command -v curl >/dev/null 2>&1 || want+=(curl)
command -v kcat >/dev/null 2>&1 || want+=(kcat)
command -v chromium >/dev/null 2>&1 || want+=(chromium)
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || want+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || want+=(systemd)
# python3 with venv: the tests install Python's jsonschema (pinned, from PyPI)
# into ~/.cache/msgx once, a JSON Schema validator independent of msgx's own.
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || want+=(python3 python3-venv)
if [ ${#want[@]} -gt 0 ]; then
  echo "installing ${want[*]} (Debian packages)"
  log=$(mktemp)
  # Debian's packages start their daemons through invoke-rc.d; on a
  # machine without a running init that fails the install, so starting is
  # left to this script (policy-rc.d 101 = "not now").
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  if ! { $SUDO apt-get update -q -o DPkg::Lock::Timeout=600 &&
         $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
           -o DPkg::Lock::Timeout=600 "${want[@]}"; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "apt-get install ${want[*]} failed (the lines above); Debian's package mirror must be reachable"
  fi
  rm -f "$log"
fi

# --- PostgreSQL ----------------------------------------------------------
ver=$(ls /usr/lib/postgresql | sort -n | tail -n1)
[ -n "$ver" ] || fail "no PostgreSQL server under /usr/lib/postgresql"
if ! pg_lsclusters -h 2>/dev/null | grep -q "^$ver main "; then
  echo "creating the PostgreSQL $ver cluster main"
  $SUDO pg_createcluster "$ver" main >/dev/null || fail "pg_createcluster $ver main failed"
fi
conf=/etc/postgresql/$ver/main
# Trust on the socket and 127.0.0.1/::1 (local development only, see the
# top). Written once; a restart applies it.
dev_conf=$conf/conf.d/msgx-dev.conf
hba=$conf/pg_hba.conf
restart=false
if ! grep -q '^# msgx local development' "$hba"; then
  $SUDO tee "$hba" >/dev/null <<'EOF'
# msgx local development: trust every local connection (see .ci/services.sh).
local   all             all                                     trust
host    all             all             127.0.0.1/32            trust
host    all             all             ::1/128                 trust
local   replication     all                                     trust
host    replication     all             127.0.0.1/32            trust
EOF
  restart=true
fi
if [ ! -f "$dev_conf" ]; then
  # Autovacuum stays on (the manual prescribes it for production, and the
  # benchmarks measure with it). More connections than the default 100:
  # the race-detector suite runs two packages at once, each with its own
  # databases and pools.
  $SUDO tee "$dev_conf" >/dev/null <<'EOF'
# msgx local development (see .ci/services.sh)
listen_addresses = '127.0.0.1'
autovacuum = on
max_connections = 300
EOF
  restart=true
fi
status=$(pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" {print $4}')
if [ "$status" = online ] && $restart; then
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" main restart >/dev/null || fail "restarting PostgreSQL $ver failed (see /var/log/postgresql)"
elif [ "$status" != online ]; then
  echo "starting PostgreSQL $ver"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" main start >/dev/null || fail "starting PostgreSQL $ver failed (see /var/log/postgresql/postgresql-$ver-main.log)"
fi

# --- MariaDB -------------------------------------------------------------
if ! mariadb-admin -uroot -h127.0.0.1 ping >/dev/null 2>&1; then
  if ! mariadb-admin -uroot ping >/dev/null 2>&1; then
    echo "starting MariaDB"
    [ -d /var/lib/mysql/mysql ] || $SUDO mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null ||
      fail "mariadb-install-db failed"
    $SUDO install -d -o mysql -g mysql /run/mysqld
    $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql ||
      fail "starting mariadbd failed (see /var/log/mysql/error.log)"
    for _ in $(seq 1 60); do
      mariadb-admin -uroot ping >/dev/null 2>&1 && break
      sleep 0.5
    done
  fi
  # Root without a password over TCP from 127.0.0.1 (local development only,
  # see the top). Debian's root@localhost authenticates by unix_socket,
  # which a TCP client cannot use; keep it and add the empty password.
  $SUDO mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
    CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" ||
    fail "setting MariaDB's local development access failed"
fi

for _ in $(seq 1 120); do
  if pg_isready -q -h 127.0.0.1 -p 5432 && mariadb-admin -uroot -h127.0.0.1 ping >/dev/null 2>&1; then
    exit 0
  fi
  sleep 0.5
done
pg_isready -q -h 127.0.0.1 -p 5432 || fail "PostgreSQL does not answer on 127.0.0.1:5432 (see /var/log/postgresql)"
fail "MariaDB does not answer root on 127.0.0.1:3306 (see /var/log/mysql/error.log)"
