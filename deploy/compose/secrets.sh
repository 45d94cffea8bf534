#!/usr/bin/env bash
# secrets.sh — write the secret files deploy/docker-compose.yaml mounts.
#
#   deploy/compose/secrets.sh [dir]        (default: deploy/compose/secrets)
#
# Writes, only where the file does not exist yet (so a second run never rotates
# anything by surprise; delete a file to regenerate it):
#
#   postgres_password        random; the password of the compose Postgres user larkline
#   postgres_dsn             postgres://larkline:<that password>@postgres:5432/larkline?sslmode=disable
#   grafana_admin_password   random; Grafana's admin user
#   lark_app_secret          your Lark app's secret, taken from $LARK_APP_SECRET
#
# The directory is made private (0700). The files inside are 0644 because Compose
# bind-mounts them into containers that run as other users (postgres, grafana,
# larkline's uid 65532); the directory keeps them from other users of this machine.
# Exits non-zero, after writing everything else, when lark_app_secret is missing and
# $LARK_APP_SECRET is empty.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:-${script_dir}/secrets}"

umask 077
mkdir -p "${dir}"
chmod 700 "${dir}"

# random_hex prints 32 random bytes as hex: safe inside a URL without escaping.
random_hex() {
	od -An -tx1 -N32 /dev/urandom | tr -d ' \n'
}

# put <name> <value>: write the file unless it exists.
put() {
	local file="${dir}/$1"
	if [[ -e "${file}" ]]; then
		echo "secrets: kept    ${file}" >&2
		return
	fi
	printf '%s\n' "$2" >"${file}.tmp"
	chmod 644 "${file}.tmp"
	mv "${file}.tmp" "${file}"
	echo "secrets: wrote   ${file}" >&2
}

if [[ ! -e "${dir}/postgres_password" ]]; then
	put postgres_password "$(random_hex)"
fi
pg_password="$(tr -d '\r\n' <"${dir}/postgres_password")"
put postgres_dsn "postgres://larkline:${pg_password}@postgres:5432/larkline?sslmode=disable"
put grafana_admin_password "$(random_hex)"

status=0
if [[ -e "${dir}/lark_app_secret" ]]; then
	echo "secrets: kept    ${dir}/lark_app_secret" >&2
elif [[ -n "${LARK_APP_SECRET:-}" ]]; then
	put lark_app_secret "${LARK_APP_SECRET}"
else
	echo "secrets: MISSING ${dir}/lark_app_secret: run again with LARK_APP_SECRET=<your Lark app secret>" >&2
	status=1
fi
exit "${status}"
