#!/usr/bin/env bash
# with-postgres.sh CMD [ARGS...]
#
# Starts a throwaway PostgreSQL (Debian's postgresql package) in a temporary
# directory, listening only on 127.0.0.1 on a free port, exports
#   TABFENCE_PG_URL=postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
# runs CMD, then stops PostgreSQL, deletes the directory and exits with CMD's
# exit code. initdb refuses to run as root, so the server runs as the
# `postgres` OS user when we are root. synchronous_commit=off matches the
# SQLite store (WAL, synchronous=NORMAL): a power loss may drop the last
# commits, never corrupt. Everything else is PostgreSQL's default.
set -euo pipefail

if [ $# -eq 0 ]; then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

bindir=""
for d in /usr/lib/postgresql/*/bin; do
	[ -x "$d/initdb" ] && bindir="$d" # the glob sorts; the last is the newest
done
if [ -z "$bindir" ]; then
	echo "with-postgres.sh: PostgreSQL not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)" >&2
	exit 1
fi

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

dir="$(mktemp -d "${TMPDIR:-/tmp}/tabfence-pg.XXXXXX")"
chmod 755 "$dir"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"

cleanup() {
	as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || true)"
if [ -z "$port" ]; then
	port=$(( 20000 + RANDOM % 20000 ))
fi

as_pg "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
	cat "$dir/initdb.log" >&2
	exit 1
}
as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c synchronous_commit=off -c max_connections=200" \
	start >/dev/null || {
	cat "$dir/server.log" >&2
	exit 1
}

export TABFENCE_PG_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
echo "with-postgres.sh: PostgreSQL $(basename "$(dirname "$bindir")") on 127.0.0.1:$port" >&2

set +e
"$@"
rc=$?
set -e
exit "$rc"
