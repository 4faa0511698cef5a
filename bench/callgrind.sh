# bench/callgrind.sh: sourced by the instruction-count benchmarks
# (commit_instructions, check_instructions).  Instructions, unlike tps, do
# not depend on what else the machine is doing.  A server runs under
# callgrind, which follows the forked backends and writes each backend's
# profile to $cg_dir/cg.PID when it exits.
#
# Sourcing it puts the programs of the server PG_CONFIG names (Debian's 15
# by default) first in PATH; as root, runs the sourcing script again as
# "postgres"; and makes $cg_dir, the servers' socket directory, where the
# script keeps their data directories: they are stopped and removed at exit.
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
export PATH="$("$PG_CONFIG" --bindir):$PATH"
if [ "$(id -u)" = 0 ]; then
	exec runuser -u postgres -- env PG_CONFIG="$PG_CONFIG" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
		bash "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" "$@"
fi
# a failure inside $(...) ends the benchmark too, instead of printing 0
shopt -s inherit_errexit
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
cg_dir=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && cg_dir=/dev/shm
cg_dir=$(mktemp -d "$cg_dir/replica_gate_cg.XXXXXX")
trap 'for d in "$cg_dir"/*/; do pg_ctl -D "$d" stop -m immediate >/dev/null 2>&1 || true; done; rm -rf "$cg_dir"' EXIT

# cg_start DATADIR PORT [postgres options]
#	Start the server of DATADIR under callgrind, its log in DATADIR.log,
#	and wait until it accepts connections.  A server that cannot start
#	under valgrind (19's build here) ends the benchmark with its log
#	instead of keeping it waiting.
cg_start()
{
	local data=$1 port=$2 server
	shift 2
	valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$cg_dir/cg.%p" \
		postgres -D "$data" -p "$port" "$@" > "$data.log" 2>&1 &
	server=$!
	for _ in $(seq 240); do
		pg_isready -q -h "$cg_dir" -p "$port" && return 0
		kill -0 "$server" 2>/dev/null || break
		sleep 0.5
	done
	echo "$(basename "$0"): the server of $data did not start under valgrind:" >&2
	tail -n 20 "$data.log" >&2
	kill "$server" 2>/dev/null || true
	exit 1
}

# cg_session PORT N SQL
#	Run SQL N times in one session on the server at PORT (an error ends
#	the benchmark); print the instruction count of the backend that served
#	it.  What the statements returned is left in $cg_dir/out.txt, after
#	the backend's PID.
cg_session()
{
	local port=$1 n=$2 sql=$3 pid
	{
		echo 'SELECT pg_backend_pid();'
		for _ in $(seq "$n"); do echo "$sql"; done
	} > "$cg_dir/in.sql"
	psql -X -q -At -v ON_ERROR_STOP=1 -h "$cg_dir" -p "$port" -d postgres -f "$cg_dir/in.sql" \
		> "$cg_dir/out.txt"
	pid=$(head -n 1 "$cg_dir/out.txt")
	# the backend writes its profile when it exits, just after psql does
	for _ in $(seq 600); do
		[ -s "$cg_dir/cg.$pid" ] && grep -q '^totals:' "$cg_dir/cg.$pid" && break
		sleep 0.1
	done
	grep -q '^totals:' "$cg_dir/cg.$pid" 2>/dev/null || {
		echo "$(basename "$0"): no profile of backend $pid" >&2
		exit 1
	}
	sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$cg_dir/cg.$pid"
}

# cg_per_statement PORT SQL
#	Instructions of one run of SQL: two sessions, of 500 and 2,500 runs;
#	the difference of their counts over the difference in runs, so that
#	connection start-up and exit cancel out.
cg_per_statement()
{
	local a b
	a=$(cg_session "$1" 500 "$2")
	b=$(cg_session "$1" 2500 "$2")
	echo $(( (b - a) / 2000 ))
}
