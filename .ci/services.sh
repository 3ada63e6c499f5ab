#!/usr/bin/env bash
# Starts the local PostgreSQL and MariaDB this project's tests and `make run`
# need, if they are not running already. Idempotent.
set -euo pipefail

if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
fi
if ! mariadb-admin -uroot -h127.0.0.1 ping >/dev/null 2>&1; then
  echo "starting MariaDB"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
fi
for i in $(seq 1 60); do
  if pg_isready -q -h 127.0.0.1 -p 5432 && mariadb-admin -uroot -h127.0.0.1 ping >/dev/null 2>&1; then
    exit 0
  fi
  sleep 1
done
echo "PostgreSQL or MariaDB did not come up" >&2
exit 1
