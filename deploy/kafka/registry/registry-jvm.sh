#!/usr/bin/env bash
# registry-jvm.sh — run a real schema registry (Apicurio Registry, Confluent-compatible
# API under /apis/ccompat/v7) built from the Maven Central artifacts pinned in
# deploy/kafka/registry/pom.xml, for machines without Docker.
#
#   registry-jvm.sh fetch
#       Build the registry once into the cache (default
#       ~/.cache/larkline/schema-registry/<apicurio.version>, XDG_CACHE_HOME respected,
#       shared by every checkout of the machine; override with
#       LARKLINE_REGISTRY_JARS): first config-index-deployment/ into a file
#       repository, then the Quarkus application. A marker holding the checksum of
#       the build files makes a second call a no-op; concurrent calls are
#       serialised with flock.
#   registry-jvm.sh start <dir> <port>
#       Fetch if needed and start the registry detached on 127.0.0.1:<port> (pid in
#       <dir>/registry.pid, output in <dir>/registry.log), its schemas in an H2
#       database file under <dir>/data, so a stopped registry restarts with them.
#       Waits until 127.0.0.1:<port> accepts connections; on failure it stops the
#       registry, prints the log tail and exits non-zero.
#   registry-jvm.sh stop <dir>
#       Stop the registry started in <dir> (SIGTERM, then SIGKILL after
#       LARKLINE_REGISTRY_STOP_TIMEOUT seconds). Leaves <dir> in place.
#   registry-jvm.sh jars
#       Print the cache directory.
#
# Environment:
#   LARKLINE_REGISTRY_JARS           cache directory (default above)
#   LARKLINE_REGISTRY_HEAP           -Xmx (default 384m)
#   LARKLINE_REGISTRY_START_TIMEOUT  seconds to wait for the listener (default 90)
#   LARKLINE_REGISTRY_STOP_TIMEOUT   seconds to wait for a clean stop (default 30)
#   JAVA_HOME / JAVA                 Java 17+ (default: java on PATH)
#   MVN                              Maven for fetch (default: mvn on PATH)
#   LARKLINE_REGISTRY_MVN_SETTINGS   Maven settings for fetch (default: settings.xml
#                                    beside this script, which sends every
#                                    repository to Maven Central)
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/../../.." && pwd)"
pom="${script_dir}/pom.xml"
main_class_marker="larkline-schema-registry-1-runner.jar"

die() {
	echo "registry-jvm: $*" >&2
	exit 1
}

# shellcheck source=/dev/null
source "${script_dir}/../jvm-lib.sh"

# registry_pid <dir> prints the pid of the registry running from <dir>, if any.
registry_pid() { recorded_pid "$1/registry.pid" "${main_class_marker}"; }

usage() {
	cat >&2 <<'EOF'
usage: registry-jvm.sh fetch
       registry-jvm.sh start <dir> <port>
       registry-jvm.sh stop <dir>
       registry-jvm.sh jars
EOF
	exit 2
}

apicurio_version() {
	local v
	v="$(sed -n 's:.*<apicurio.version>\([^<]*\)</apicurio.version>.*:\1:p' "${pom}" | head -n1)"
	[[ -n "${v}" ]] || die "cannot read <apicurio.version> from ${pom}"
	printf '%s\n' "${v}"
}

jars_dir() {
	if [[ -n "${LARKLINE_REGISTRY_JARS:-}" ]]; then
		printf '%s\n' "${LARKLINE_REGISTRY_JARS}"
	else
		printf '%s\n' "${XDG_CACHE_HOME:-${HOME}/.cache}/larkline/schema-registry/$(apicurio_version)"
	fi
}

# build_sum covers every file that shapes the build.
build_sum() {
	(cd "${script_dir}" && find pom.xml settings.xml src config-index-deployment/pom.xml config-index-deployment/src -type f -print0 |
		LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

mvn_quiet() {
	local out
	if ! out="$("${MVN:-mvn}" -q -B -Dstyle.color=never -s "${LARKLINE_REGISTRY_MVN_SETTINGS:-${script_dir}/settings.xml}" "$@" 2>&1)"; then
		printf '%s\n' "${out}" | grep -v -E '^\[INFO\] Download' | tail -n 60 >&2
		return 1
	fi
}

fetch() {
	local dir marker want lock tmp
	dir="$(jars_dir)"
	marker="${dir}/.complete"
	want="$(build_sum)"
	if [[ -f "${marker}" && "$(cat "${marker}")" == "${want}" ]]; then
		return 0
	fi
	command -v "${MVN:-mvn}" >/dev/null 2>&1 || die "mvn not found; it is needed once to build the registry into ${dir}"
	mkdir -p "$(dirname "${dir}")"
	lock="${dir}.lock"
	exec 9>"${lock}"
	if command -v flock >/dev/null 2>&1; then
		flock 9
	fi
	if [[ -f "${marker}" && "$(cat "${marker}")" == "${want}" ]]; then
		exec 9>&-
		return 0
	fi
	tmp="$(mktemp -d "${dir}.tmp.XXXXXX")"
	echo "registry-jvm: building Apicurio Registry $(apicurio_version) into ${dir}" >&2
	# Build in a copy: Maven writes target/ beside the pom.
	mkdir -p "${tmp}/src" "${tmp}/shim-repo"
	cp -R "${script_dir}/pom.xml" "${script_dir}/src" "${script_dir}/config-index-deployment" "${tmp}/src/"
	local shim="${tmp}/src/config-index-deployment"
	if ! mvn_quiet -f "${shim}/pom.xml" package ||
		! mvn_quiet -f "${shim}/pom.xml" org.apache.maven.plugins:maven-install-plugin:3.1.3:install-file \
			-Dfile="${shim}/target/apicurio-common-app-components-config-index-deployment-0.1.18.Final.jar" \
			-DpomFile="${shim}/pom.xml" -DlocalRepositoryPath="${tmp}/shim-repo"; then
		rm -rf "${tmp}"
		die "maven could not build config-index-deployment (see above)"
	fi
	if ! mvn_quiet -f "${tmp}/src/pom.xml" -DskipTests -Dlarkline.shim.repo="file://${tmp}/shim-repo" package; then
		rm -rf "${tmp}"
		die "maven could not build the registry (see above)"
	fi
	[[ -f "${tmp}/src/target/${main_class_marker}" && -d "${tmp}/src/target/lib" ]] || {
		rm -rf "${tmp}"
		die "maven finished but no ${main_class_marker} was built"
	}
	mkdir -p "${tmp}/out"
	mv "${tmp}/src/target/${main_class_marker}" "${tmp}/src/target/lib" "${tmp}/out/"
	printf '%s\n' "${want}" >"${tmp}/out/.complete"
	rm -rf "${dir}"
	mv "${tmp}/out" "${dir}"
	rm -rf "${tmp}"
	exec 9>&-
}

start() {
	[[ $# -eq 2 ]] || usage
	local dir="$1" port="$2" jars java pid deadline timeout
	valid_port "${port}" || die "invalid port: ${port}"
	check_java "the registry"
	fetch
	jars="$(jars_dir)"
	java="$(java_bin)"
	mkdir -p "${dir}/data"
	dir="$(cd "${dir}" && pwd)"
	if [[ -n "$(registry_pid "${dir}")" ]]; then
		die "a registry is already running from ${dir} (pid $(registry_pid "${dir}"))"
	fi
	if port_open "${port}"; then
		die "127.0.0.1:${port} is already in use"
	fi
	local detach=()
	if command -v setsid >/dev/null 2>&1; then
		detach=(setsid)
	fi
	# H2 in a file (not the default in-memory database): a restart keeps the schemas
	# and their ids, as a production registry's storage does.
	REGISTRY_DATASOURCE_URL="jdbc:h2:file:${dir}/data/registry;DB_CLOSE_ON_EXIT=FALSE" \
		"${detach[@]}" "${java}" "-Xmx${LARKLINE_REGISTRY_HEAP:-384m}" -Djava.awt.headless=true \
		-Dquarkus.http.host=127.0.0.1 "-Dquarkus.http.port=${port}" \
		-Dquarkus.log.level=WARN -Dquarkus.banner.enabled=false \
		-jar "${jars}/${main_class_marker}" \
		>>"${dir}/registry.log" 2>&1 </dev/null &
	pid=$!
	printf '%s\n' "${pid}" >"${dir}/registry.pid"

	timeout="${LARKLINE_REGISTRY_START_TIMEOUT:-90}"
	deadline=$((SECONDS + timeout))
	until port_open "${port}"; do
		if ! alive "${pid}"; then
			rm -f "${dir}/registry.pid"
			log_tail "${dir}/registry.log" registry-jvm
			die "registry exited before 127.0.0.1:${port} accepted connections"
		fi
		if ((SECONDS >= deadline)); then
			stop "${dir}" || true
			log_tail "${dir}/registry.log" registry-jvm
			die "registry did not accept connections on 127.0.0.1:${port} within ${timeout}s"
		fi
		sleep 0.2
	done
	echo "registry-jvm: registry pid ${pid} listening on 127.0.0.1:${port}, dir ${dir}" >&2
}

stop() {
	[[ $# -eq 1 ]] || usage
	local dir="$1" pid deadline timeout
	[[ -d "${dir}" ]] || return 0
	pid="$(registry_pid "${dir}")"
	if [[ -z "${pid}" ]]; then
		rm -f "${dir}/registry.pid"
		return 0
	fi
	kill -TERM "${pid}" 2>/dev/null || true
	timeout="${LARKLINE_REGISTRY_STOP_TIMEOUT:-30}"
	deadline=$((SECONDS + timeout))
	while alive "${pid}"; do
		if ((SECONDS >= deadline)); then
			echo "registry-jvm: registry pid ${pid} did not stop within ${timeout}s; killing it" >&2
			kill -KILL "${pid}" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	rm -f "${dir}/registry.pid"
}

[[ $# -ge 1 ]] || usage
cmd="$1"
shift
case "${cmd}" in
fetch)
	[[ $# -eq 0 ]] || usage
	fetch
	;;
start) start "$@" ;;
stop) stop "$@" ;;
jars)
	[[ $# -eq 0 ]] || usage
	jars_dir
	;;
*) usage ;;
esac
