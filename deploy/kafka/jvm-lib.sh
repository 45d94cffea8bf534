# shellcheck shell=bash
# Helpers shared by kafka-jvm.sh and registry/registry-jvm.sh, the scripts that run
# larkline's test services from Maven Central jars without Docker. Sourced, not run;
# the sourcing script sets prog (its name in messages) and defines usage().

die() {
	echo "${prog}: $*" >&2
	exit 1
}

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

# pom_property <pom> <name> prints the value of <name> in the pom's <properties>.
pom_property() {
	local v
	v="$(sed -n "s:.*<$2>\([^<]*\)</$2>.*:\1:p" "$1" | head -n1)"
	[[ -n "${v}" ]] || die "cannot read <$2> from $1"
	printf '%s\n' "${v}"
}

# cache_dir <override> <kind> <version> prints <override> when set, else the machine's
# cache for <kind> at <version> (XDG_CACHE_HOME respected), shared by every checkout.
cache_dir() {
	if [[ -n "$1" ]]; then
		printf '%s\n' "$1"
	else
		printf '%s\n' "${XDG_CACHE_HOME:-${HOME}/.cache}/larkline/$2/$3"
	fi
}

# cached_build <dir> <sum> <builder> fills <dir> once per <sum>: unless <dir>/.complete
# already holds <sum>, it runs "<builder> <work> <out>" under a flock on <dir>.lock
# (concurrent callers wait, then find the work done), with <work> a scratch directory
# and <out> the empty directory that replaces <dir> when <builder> succeeds. A
# failing <builder> prints why and returns non-zero; nothing of it is kept.
cached_build() {
	local dir="$1" want="$2" builder="$3" tmp
	built "${dir}" "${want}" && return 0
	command -v "${MVN:-mvn}" >/dev/null 2>&1 || die "mvn not found; it is needed once to fill ${dir}"
	mkdir -p "$(dirname "${dir}")"
	exec 9>"${dir}.lock"
	if command -v flock >/dev/null 2>&1; then
		flock 9
	fi
	if built "${dir}" "${want}"; then
		exec 9>&-
		return 0
	fi
	tmp="$(mktemp -d "${dir}.tmp.XXXXXX")"
	mkdir -p "${tmp}/work" "${tmp}/out"
	if ! "${builder}" "${tmp}/work" "${tmp}/out"; then
		rm -rf "${tmp}"
		exec 9>&-
		die "could not fill ${dir} (see above)"
	fi
	printf '%s\n' "${want}" >"${tmp}/out/.complete"
	rm -rf "${dir}"
	mv "${tmp}/out" "${dir}"
	rm -rf "${tmp}"
	exec 9>&-
}

# built <dir> <sum> succeeds when <dir> holds a finished build of <sum>.
built() { [[ -f "$1/.complete" && "$(cat "$1/.complete")" == "$2" ]]; }

# mvn_quiet <args...> runs Maven in batch mode and shows its output only when it fails
# (quiet mode still prints ANSI resets).
mvn_quiet() {
	local out
	if ! out="$("${MVN:-mvn}" -q -B -Dstyle.color=never "$@" 2>&1)"; then
		printf '%s\n' "${out}" | grep -v -E '^\[INFO\] Download' | tail -n 60 >&2
		return 1
	fi
}

# cpu_seconds <pid> prints the CPU time (user + system, whole seconds) <pid> has used,
# or nothing when /proc cannot tell.
cpu_seconds() {
	local stat f
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
	read -r -a f <<<"${stat##*) }" # fields 3 on; utime and stime are fields 14 and 15
	[[ "${f[11]:-}" =~ ^[0-9]+$ && "${f[12]:-}" =~ ^[0-9]+$ ]] || return 0
	echo $(((f[11] + f[12]) / $(getconf CLK_TCK 2>/dev/null || echo 100)))
}

# launch <dir> <name> <port> <timeout> <command...> starts <command> detached, in its
# own session so a terminal's Ctrl-C reaches the caller (which stops it in order)
# rather than the JVM, with its pid in <dir>/<name>.pid and its output appended to
# <dir>/<name>.log; then waits until 127.0.0.1:<port> accepts connections. <timeout>
# is counted in the process's own CPU seconds where /proc tells them (wall seconds
# elsewhere): a loaded machine stretches a start's wall time, not the work it needs.
# Wall time is bounded too, at ten times <timeout>, for a start that hangs idle.
# When the process exits first or a bound is reached, it is stopped, the log tail
# printed and the script dies.
launch() {
	local dir="$1" name="$2" port="$3" timeout="$4" pid start cpu used detach=()
	shift 4
	if command -v setsid >/dev/null 2>&1; then
		detach=(setsid)
	fi
	"${detach[@]}" "$@" >>"${dir}/${name}.log" 2>&1 </dev/null &
	pid=$!
	printf '%s\n' "${pid}" >"${dir}/${name}.pid"
	start=${SECONDS}
	until port_open "${port}"; do
		if ! alive "${pid}"; then
			rm -f "${dir}/${name}.pid"
			log_tail "${dir}/${name}.log" "${prog}"
			die "${name} exited before 127.0.0.1:${port} accepted connections"
		fi
		cpu="$(cpu_seconds "${pid}")"
		used="${cpu:-$((SECONDS - start))}"
		if ((used >= timeout || SECONDS - start >= 10 * timeout)); then
			halt "${pid}" "${dir}/${name}.pid" 30 "${name}"
			log_tail "${dir}/${name}.log" "${prog}"
			die "${name} did not accept connections on 127.0.0.1:${port} within its ${timeout}s bound (${cpu:-?}s of CPU time, $((SECONDS - start))s of wall time)"
		fi
		sleep 0.2
	done
	echo "${prog}: ${name} pid ${pid} listening on 127.0.0.1:${port}, dir ${dir}" >&2
}

# halt <pid> <pidfile> <timeout> <name> stops <pid> (SIGTERM, then SIGKILL after
# <timeout> seconds) and removes <pidfile>. An empty <pid> only removes the file.
halt() {
	local pid="$1" pidfile="$2" timeout="$3" name="$4" deadline
	if [[ -n "${pid}" ]]; then
		kill -TERM "${pid}" 2>/dev/null || true
		deadline=$((SECONDS + timeout))
		while alive "${pid}"; do
			if ((SECONDS >= deadline)); then
				echo "${prog}: ${name} pid ${pid} did not stop within ${timeout}s; killing it" >&2
				kill -KILL "${pid}" 2>/dev/null || true
				break
			fi
			sleep 0.2
		done
	fi
	rm -f "${pidfile}"
}

# dispatch <args...> runs the sourcing script's command: fetch, start, stop or jars,
# each a function of that script (jars prints jars_dir); anything else is usage.
dispatch() {
	[[ $# -ge 1 ]] || usage
	local cmd="$1"
	shift
	case "${cmd}" in
	fetch | jars)
		[[ $# -eq 0 ]] || usage
		if [[ "${cmd}" == fetch ]]; then fetch; else jars_dir; fi
		;;
	start) start "$@" ;;
	stop) stop "$@" ;;
	*) usage ;;
	esac
}
