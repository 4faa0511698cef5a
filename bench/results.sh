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
