# bench/results.sh: sourced by the benchmark commands.
#
# rg_results NAME
#	From here on, copy what the command prints to
#	bench/results/DATE-TIME-HOST-NAME.txt, headed by the date, the machine
#	(cores, CPU, memory, kernel) and the versions of PostgreSQL (the server
#	PG_CONFIG names) and replica_gate.
rg_results()
{
	local src
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	mkdir -p "$src/bench/results"
	exec > >(tee "$src/bench/results/$(date -u +%Y-%m-%dT%H%M)-$(hostname -s)-$1.txt")
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: $(hostname -s), $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)," \
		"$(awk '/MemTotal/ {printf "%.1f GB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"
	echo "versions: PostgreSQL $("$PG_CONFIG" --version | awk '{print $2}'), replica_gate" \
		"$(git -c safe.directory="$src" -C "$src" describe --always --dirty 2>/dev/null ||
			sed -n "s/^default_version = '\(.*\)'/\1/p" "$src/replica_gate.control")"
}

# rg_bench_env [VAR...] -- SCRIPT [ARG...]
#	PG_CONFIG (Debian's 15 unless set), its bindir first in PATH, $major
#	(its major version), for a build newer than 15 its libdir in
#	LD_LIBRARY_PATH (the programs need its own libpq), and $src, the
#	checkout.  As root, re-runs "bash SCRIPT ARG..." as postgres, from
#	/tmp, with bench/results made its own, passing PATH, PG_CONFIG,
#	LD_LIBRARY_PATH and the variables VAR... (empty when unset).
rg_bench_env()
{
	local pass=() libdir script
	while [ "$1" != -- ]; do pass+=("$1=${!1:-}"); shift; done
	shift
	export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
	export PATH="$("$PG_CONFIG" --bindir):$PATH"
	major=$("$PG_CONFIG" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
	libdir=$("$PG_CONFIG" --libdir)
	if [ "$major" -gt 15 ] && [[ ":${LD_LIBRARY_PATH:-}:" != *":$libdir:"* ]]; then
		export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	fi
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	if [ "$(id -u)" = 0 ]; then
		script="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
		shift
		mkdir -p "$src/bench/results" && chown postgres "$src/bench/results"
		cd /tmp
		exec runuser -u postgres -- env PATH="$PATH" PG_CONFIG="$PG_CONFIG" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
			"${pass[@]}" bash "$script" "$@"
	fi
}

# rg_tmpdir NAME
#	$dir: a new directory $tmp/replica_gate_NAME.XXXXXX for the servers,
#	$tmp being /dev/shm when it is writable, else /tmp.
rg_tmpdir()
{
	tmp=/tmp
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then tmp=/dev/shm; fi
	dir=$(mktemp -d "$tmp/replica_gate_$1.XXXXXX")
}

# rg_sql PORT SQL...: psql's unaligned rows of SQL on the server of $dir at
# PORT, database postgres
rg_sql() { local port=$1; shift; psql -X -At -h "$dir" -p "$port" -d postgres -c "$*"; }

# rg_median VALUE...: the middle value (of an even count, the lower one)
rg_median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
