# test/scratch.sh
#	Sourced by test/run and test/chaos, as root: copy the checkout to a
#	scratch folder (it may sit in a home folder that "postgres" cannot
#	read, and must get no root-owned files), build it there with -Werror,
#	install it into a server and hand the copy to "postgres", since
#	PostgreSQL refuses to run as root.

# rg_scratch_install SRC PG_CONFIG
#	Print the scratch folder, owned by postgres, with SRC built and
#	installed into PG_CONFIG's server.
rg_scratch_install()
{
	local src=$1 pg_config=$2 scratch
	scratch=$(mktemp -d /tmp/replica_gate_test.XXXXXX)
	tar -C "$src" --exclude=.git -cf - . | tar -C "$scratch" -xf -
	make -C "$scratch" -s clean PG_CONFIG="$pg_config" >&2
	make -C "$scratch" -s COPT=-Werror PG_CONFIG="$pg_config" >&2
	make -C "$scratch" -s install PG_CONFIG="$pg_config" >&2
	chown -R postgres:postgres "$scratch"
	chmod 755 "$scratch"
	echo "$scratch"
}
