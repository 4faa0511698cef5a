# test/scratch.sh
#	Sourced by test/run and test/chaos, as root: copy the checkout to a
#	scratch folder (it may sit in a home folder that "postgres" cannot
#	read, and must get no root-owned files), build it there with -Werror,
#	install it into a server and hand the copy to "postgres", since
#	PostgreSQL refuses to run as root.  test/clients/node_modules stays
#	behind: the node client's packages come from the folder
#	.ci/install-deps fills (NODE_PATH, test/run).

# rg_scratch_install SRC PG_CONFIG
#	Print the scratch folder, owned by postgres, with SRC built and
#	installed into PG_CONFIG's server.  It says what it builds on stderr
#	(stdout is the folder), and shows the build's output only on failure.
rg_scratch_install()
{
	local src=$1 pg_config=$2 scratch
	scratch=$(mktemp -d /tmp/replica_gate_test.XXXXXX)
	tar -C "$src" --exclude=.git --exclude=./test/clients/node_modules -cf - . |
		tar -C "$scratch" -xf -
	echo "building replica_gate with -Werror and installing it into $("$pg_config" --version) (about 10 s)" >&2
	{
		make -C "$scratch" -s clean PG_CONFIG="$pg_config" &&
			make -C "$scratch" -s COPT=-Werror PG_CONFIG="$pg_config" &&
			make -C "$scratch" -s install PG_CONFIG="$pg_config"
	} >"$scratch/build.log" 2>&1 || {
		cat "$scratch/build.log" >&2
		echo "the build failed" >&2
		rm -rf "$scratch"
		return 1
	}
	rm "$scratch/build.log"
	chown -R postgres:postgres "$scratch"
	chmod 755 "$scratch"
	echo "$scratch"
}
