#!/usr/bin/env bash
# kafka-jvm.sh — run a real single-node KRaft Apache Kafka broker straight from the
# Maven Central jars pinned in deploy/kafka/pom.xml, for machines without Docker.
#
#   kafka-jvm.sh fetch
#       Resolve the broker's runtime jars with Maven into the jar cache
#       (default ~/.cache/larkline/kafka-jars/<kafka.version>, XDG_CACHE_HOME respected,
#       shared by every checkout of the machine; override with
#       LARKLINE_KAFKA_JARS). A marker file holding the pom's checksum makes a
#       second call a no-op; concurrent calls are serialised with flock.
#   kafka-jvm.sh start <dir> <port> <controller-port>
#       Fetch if needed, write <dir>/server.properties and <dir>/log4j2.properties,
#       format <dir>/data with a fresh cluster id (unless already formatted, so a
#       stopped broker restarts with its data), start the broker detached
#       (pid in <dir>/broker.pid, output in <dir>/broker.log) and wait until
#       127.0.0.1:<port> accepts connections. On failure the broker is stopped,
#       the log tail is printed, and the exit status is non-zero.
#   kafka-jvm.sh stop <dir>
#       Stop the broker started in <dir> (SIGTERM, then SIGKILL after
#       LARKLINE_KAFKA_STOP_TIMEOUT seconds). Leaves <dir> in place.
#   kafka-jvm.sh jars
#       Print the jar cache directory.
#
# Environment:
#   LARKLINE_KAFKA_JARS           jar cache directory (default above)
#   LARKLINE_KAFKA_HEAP           broker -Xmx (default 768m)
#   LARKLINE_KAFKA_START_TIMEOUT  CPU seconds the JVM may use before it listens
#                                    (default 90; wall time at ten times that)
#   LARKLINE_KAFKA_STOP_TIMEOUT   seconds to wait for a clean stop (default 30)
#   LARKLINE_KAFKA_EXTRA_PROPERTIES  a properties file appended to server.properties
#                                 (later keys win): listeners, TLS, SASL and the
#                                 authorizer of the secured test broker
#                                 (internal/testenv/provision/secured.go)
#   JAVA_HOME / JAVA              Java 17+ to use (default: java on PATH)
#   MVN                           Maven to use for fetch (default: mvn on PATH)
#
# Listeners bind to 127.0.0.1 only. Every internal topic is single-replica,
# group.initial.rebalance.delay.ms=0 and auto.create.topics.enable=false.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pom="${script_dir}/pom.xml"
prog=kafka-jvm

# shellcheck source=/dev/null
source "${script_dir}/jvm-lib.sh"

# broker_pid <dir> prints the pid of the broker running from <dir>, if any.
broker_pid() { recorded_pid "$1/broker.pid" "kafka\\.Kafka"; }

usage() {
	cat >&2 <<'USAGE'
usage: kafka-jvm.sh fetch
       kafka-jvm.sh start <dir> <port> <controller-port>
       kafka-jvm.sh stop <dir>
       kafka-jvm.sh jars
USAGE
	exit 2
}

kafka_version() { pom_property "${pom}" kafka.version; }

jars_dir() { cache_dir "${LARKLINE_KAFKA_JARS:-}" kafka-jars "$(kafka_version)"; }

# copy_jars <work> <out> resolves the broker's runtime jars into <out>.
copy_jars() {
	echo "kafka-jvm: fetching Kafka $(kafka_version) jars into $(jars_dir)" >&2
	mvn_quiet -f "${pom}" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$2" || return 1
	compgen -G "$2/kafka_2.13-*.jar" >/dev/null || {
		echo "kafka-jvm: maven finished but no kafka_2.13 jar was copied" >&2
		return 1
	}
}

fetch() { cached_build "$(jars_dir)" "$(sha256sum "${pom}" | cut -d' ' -f1)" copy_jars; }

write_config() {
	local dir="$1" port="$2" cport="$3"
	cat >"${dir}/server.properties" <<EOF
# Written by deploy/kafka/kafka-jvm.sh: single-node KRaft broker for tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${cport}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${cport}
advertised.listeners=PLAINTEXT://127.0.0.1:${port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=${dir}/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
EOF
	if [[ -n "${LARKLINE_KAFKA_EXTRA_PROPERTIES:-}" ]]; then
		[[ -r "${LARKLINE_KAFKA_EXTRA_PROPERTIES}" ]] || die "LARKLINE_KAFKA_EXTRA_PROPERTIES=${LARKLINE_KAFKA_EXTRA_PROPERTIES}: not a readable file"
		{
			echo "# Appended from LARKLINE_KAFKA_EXTRA_PROPERTIES; later keys win."
			cat "${LARKLINE_KAFKA_EXTRA_PROPERTIES}"
		} >>"${dir}/server.properties"
	fi
	cat >"${dir}/log4j2.properties" <<'EOF'
# Written by deploy/kafka/kafka-jvm.sh: warnings and errors only, to stderr (broker.log).
status = warn
name = larkline-test-broker
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
EOF
}

start() {
	[[ $# -eq 3 ]] || usage
	local dir="$1" port="$2" cport="$3" jars java cluster_id
	valid_port "${port}" || die "invalid port: ${port}"
	valid_port "${cport}" || die "invalid controller port: ${cport}"
	[[ "${port}" != "${cport}" ]] || die "port and controller port must differ"
	check_java "Kafka 4"
	fetch
	jars="$(jars_dir)"
	java="$(java_bin)"
	mkdir -p "${dir}"
	dir="$(cd "${dir}" && pwd)"
	if [[ -n "$(broker_pid "${dir}")" ]]; then
		die "a broker is already running from ${dir} (pid $(broker_pid "${dir}"))"
	fi
	if port_open "${port}"; then
		die "127.0.0.1:${port} is already in use"
	fi
	if port_open "${cport}"; then
		die "127.0.0.1:${cport} is already in use"
	fi
	write_config "${dir}" "${port}" "${cport}"

	# A <dir> whose data is already formatted is a restart: keep its cluster id.
	if [[ ! -f "${dir}/data/meta.properties" ]]; then
		cluster_id="$("${java}" -cp "${jars}/*" kafka.tools.StorageTool random-uuid 2>>"${dir}/broker.log")" ||
			{ log_tail "${dir}/broker.log" kafka-jvm; die "kafka.tools.StorageTool random-uuid failed"; }
		"${java}" -cp "${jars}/*" kafka.tools.StorageTool format \
			-t "${cluster_id}" -c "${dir}/server.properties" >>"${dir}/broker.log" 2>&1 ||
			{ log_tail "${dir}/broker.log" kafka-jvm; die "formatting ${dir}/data failed"; }
	fi

	launch "${dir}" broker "${port}" "${LARKLINE_KAFKA_START_TIMEOUT:-90}" \
		"${java}" "-Xmx${LARKLINE_KAFKA_HEAP:-768m}" -Djava.awt.headless=true \
		"-Dlog4j2.configurationFile=${dir}/log4j2.properties" \
		-cp "${jars}/*" kafka.Kafka "${dir}/server.properties"
}

stop() {
	[[ $# -eq 1 ]] || usage
	[[ -d "$1" ]] || return 0
	halt "$(broker_pid "$1")" "$1/broker.pid" "${LARKLINE_KAFKA_STOP_TIMEOUT:-30}" broker
}

dispatch "$@"
