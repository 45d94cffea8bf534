# shellcheck shell=bash
# Helpers shared by kafka-jvm.sh and registry/registry-jvm.sh, the scripts that run
# larkline's test services from Maven Central jars without Docker. Sourced, not run;
# the sourcing script defines die().

# java_bin prints the Java to use: $JAVA, else $JAVA_HOME/bin/java, else java.
java_bin() {
	if [[ -n "${JAVA:-}" ]]; then
		printf '%s\n' "${JAVA}"
	elif [[ -n "${JAVA_HOME:-}" ]]; then
		printf '%s\n' "${JAVA_HOME}/bin/java"
	else
		printf '%s\n' java
	fi
}

# check_java <what> dies unless java_bin is Java 17 or newer; <what> names what
# needs it in the message.
check_java() {
	local java major
	java="$(java_bin)"
	command -v "${java}" >/dev/null 2>&1 || die "java not found (${java}); $1 needs Java 17 or newer"
	# First line looks like: openjdk version "17.0.15" 2025-04-15 (or "1.8.0_x" for Java 8).
	major="$("${java}" -version 2>&1 | sed -n '1s/.*version "\([0-9]*\)[."].*/\1/p')"
	[[ "${major}" =~ ^[0-9]+$ ]] || die "cannot read the Java version of ${java}"
	((major >= 17)) || die "${java} is Java ${major}; $1 needs Java 17 or newer"
}

# recorded_pid <pidfile> <pattern> prints the pid in <pidfile> when that process is
# alive and its command line matches <pattern> (guards against pid reuse); prints
# nothing otherwise.
recorded_pid() {
	local pidfile="$1" pattern="$2" pid
	[[ -f "${pidfile}" ]] || return 0
	pid="$(cat "${pidfile}")"
	[[ "${pid}" =~ ^[0-9]+$ ]] || return 0
	alive "${pid}" || return 0
	if [[ -r "/proc/${pid}/cmdline" ]] && ! tr '\0' ' ' <"/proc/${pid}/cmdline" | grep -q "${pattern}"; then
		return 0
	fi
	printf '%s\n' "${pid}"
}

# alive <pid> succeeds while <pid> runs; a zombie (an exited child this script has
# not reaped) counts as gone.
alive() {
	local stat
	if [[ -r "/proc/$1/stat" ]]; then
		stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
		stat="${stat##*) }"
		[[ "${stat:0:1}" != "Z" ]]
	else
		kill -0 "$1" 2>/dev/null
	fi
}

port_open() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

valid_port() {
	[[ "$1" =~ ^[0-9]+$ ]] && (($1 > 0 && $1 < 65536))
}

# log_tail <logfile> <prog> prints the last lines of <logfile> on stderr, if any.
log_tail() {
	if [[ -f "$1" ]]; then
		echo "$2: last lines of $1:" >&2
		tail -n 40 "$1" >&2
	fi
}
