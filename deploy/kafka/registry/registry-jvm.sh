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
#   LARKLINE_REGISTRY_START_TIMEOUT  CPU seconds the JVM may use before it listens
#                                    (default 90; wall time at ten times that)
#   LARKLINE_REGISTRY_STOP_TIMEOUT   seconds to wait for a clean stop (default 30)
#   JAVA_HOME / JAVA                 Java 17+ (default: java on PATH)
#   MVN                              Maven for fetch (default: mvn on PATH)
#   LARKLINE_REGISTRY_MVN_SETTINGS   Maven settings for fetch (default: settings.xml
#                                    beside this script, which sends every
#                                    repository to Maven Central)
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pom="${script_dir}/pom.xml"
runner="larkline-schema-registry-1-runner.jar"
prog=registry-jvm

# shellcheck source=/dev/null
source "${script_dir}/../jvm-lib.sh"

# registry_pid <dir> prints the pid of the registry running from <dir>, if any.
registry_pid() { recorded_pid "$1/registry.pid" "${runner}"; }

usage() {
	cat >&2 <<'USAGE'
usage: registry-jvm.sh fetch
       registry-jvm.sh start <dir> <port>
       registry-jvm.sh stop <dir>
       registry-jvm.sh jars
USAGE
	exit 2
}

apicurio_version() { pom_property "${pom}" apicurio.version; }

jars_dir() { cache_dir "${LARKLINE_REGISTRY_JARS:-}" schema-registry "$(apicurio_version)"; }

# build_sum covers every file that shapes the build.
build_sum() {
	(cd "${script_dir}" && find pom.xml settings.xml src config-index-deployment/pom.xml config-index-deployment/src -type f -print0 |
		LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

# build <work> <out> builds config-index-deployment/ into a file repository, then the
# Quarkus application, in a copy under <work> (Maven writes target/ beside the pom),
# and moves the runner and its lib/ into <out>.
build() {
	local work="$1" out="$2" shim="$1/src/config-index-deployment"
	local mvn=(-s "${LARKLINE_REGISTRY_MVN_SETTINGS:-${script_dir}/settings.xml}")
	echo "registry-jvm: building Apicurio Registry $(apicurio_version) into $(jars_dir)" >&2
	mkdir -p "${work}/src" "${work}/shim-repo"
	cp -R "${script_dir}/pom.xml" "${script_dir}/src" "${script_dir}/config-index-deployment" "${work}/src/"
	mvn_quiet "${mvn[@]}" -f "${shim}/pom.xml" package &&
		mvn_quiet "${mvn[@]}" -f "${shim}/pom.xml" org.apache.maven.plugins:maven-install-plugin:3.1.3:install-file \
			-Dfile="${shim}/target/apicurio-common-app-components-config-index-deployment-0.1.18.Final.jar" \
			-DpomFile="${shim}/pom.xml" -DlocalRepositoryPath="${work}/shim-repo" &&
		mvn_quiet "${mvn[@]}" -f "${work}/src/pom.xml" -DskipTests -Dlarkline.shim.repo="file://${work}/shim-repo" package ||
		return 1
	[[ -f "${work}/src/target/${runner}" && -d "${work}/src/target/lib" ]] || {
		echo "registry-jvm: maven finished but no ${runner} was built" >&2
		return 1
	}
	mv "${work}/src/target/${runner}" "${work}/src/target/lib" "${out}/"
}

fetch() { cached_build "$(jars_dir)" "$(build_sum)" build; }

start() {
	[[ $# -eq 2 ]] || usage
	local dir="$1" port="$2" jars java
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
	# H2 in a file (not the default in-memory database): a restart keeps the schemas
	# and their ids, as a production registry's storage does.
	launch "${dir}" registry "${port}" "${LARKLINE_REGISTRY_START_TIMEOUT:-90}" \
		env "REGISTRY_DATASOURCE_URL=jdbc:h2:file:${dir}/data/registry;DB_CLOSE_ON_EXIT=FALSE" \
		"${java}" "-Xmx${LARKLINE_REGISTRY_HEAP:-384m}" -Djava.awt.headless=true \
		-Dquarkus.http.host=127.0.0.1 "-Dquarkus.http.port=${port}" \
		-Dquarkus.log.level=WARN -Dquarkus.banner.enabled=false \
		-jar "${jars}/${runner}"
}

stop() {
	[[ $# -eq 1 ]] || usage
	[[ -d "$1" ]] || return 0
	halt "$(registry_pid "$1")" "$1/registry.pid" "${LARKLINE_REGISTRY_STOP_TIMEOUT:-30}" registry
}

dispatch "$@"
