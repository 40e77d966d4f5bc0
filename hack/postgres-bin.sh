#!/usr/bin/env bash
# Prints the directory of PostgreSQL's server binaries (initdb, postgres, psql) that
# `retrycap observe --postgres`'s test starts; installs Debian's postgresql package with apt-get
# when none is there (as root; otherwise it says what to install). The test starts its own
# server in a temporary directory on a unix socket and stops it by PID: the package's own
# cluster service is not used.
set -euo pipefail

find_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && [ -x "$d/psql" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

if d=$(find_bin); then
	echo "$d"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "postgres-bin: no PostgreSQL server under /usr/lib/postgresql/*/bin: apt-get install postgresql" >&2
	exit 1
fi
echo "postgres-bin: installing postgresql with apt-get" >&2
apt-get update -qq >&2
# policy-rc.d: install the binaries without starting the package's own cluster
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d.retrycap
chmod +x /usr/sbin/policy-rc.d.retrycap
if [ ! -e /usr/sbin/policy-rc.d ]; then
	cp /usr/sbin/policy-rc.d.retrycap /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d /usr/sbin/policy-rc.d.retrycap' EXIT
else
	trap 'rm -f /usr/sbin/policy-rc.d.retrycap' EXIT
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
find_bin
