# replica_gate behind pgbouncer in transaction pooling mode: the token as a
# ParameterStatus, the token in the writer's query string, and which gate
# patterns still protect the read when consecutive transactions may use
# different server connections.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my $pgbouncer = '/usr/sbin/pgbouncer';
plan skip_all => 'pgbouncer is not installed' unless -x $pgbouncer;

# Debian 12's pgbouncer speaks protocol 3.0 only, and libpq 19 asks for a
# newer one by default (older libpq ignores the variable).
$ENV{PGMAXPROTOCOLVERSION} = '3.0';

my ($primary, $standby) = rg_primary_standby(
	standby_conf => "recovery_min_apply_delay = '300ms'\n");
$primary->safe_psql('postgres',
	'CREATE TABLE counter (v int); INSERT INTO counter VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

my $dir = PostgreSQL::Test::Utils::tempdir_short;
my $port = rg_pgbouncer($dir, [], primary => $primary, standby => $standby);
my $via = sub { "host=$dir port=$port dbname=$_[0]" };

# Run psql through pgbouncer.
sub bounced
{
	my ($db, $sql) = @_;
	my ($o, $e) = ('', '');
	IPC::Run::run([ 'psql', '-XAtq', '-d', $via->($db), '-c', $sql ],
		'>', \$o, '2>', \$e);
	chomp $o;
	return ($?, $o, $e);
}

# --- the token as a ParameterStatus ----------------------------------------
my $rg_client = rg_build_client('rg_client');
my ($o, $e) = ('', '');
IPC::Run::run([ $rg_client, $via->('primary'), $via->('standby'), '5', '5000', 'function' ],
	'>', \$o, '2>', \$e);
is($?, 0, 'libpq client through pgbouncer') or diag($e);
like($o, qr/6 reads, 6 on standby, 0 on primary, 0 stale/,
	'pgbouncer passes the token ParameterStatus of the committing server connection on');

# --- what works ----------------------------------------------------------------
# Write and token in one query string: the server connection stays assigned
# until ReadyForQuery, so last_commit_token() runs in the writer's session.
my ($rc, $token) = bounced('primary',
	'BEGIN; UPDATE counter SET v = 1; COMMIT; SELECT replica_gate.last_commit_token()');
is($rc, 0, 'write and token in one query string through pgbouncer');
like($token, qr/^1:[0-9A-F]+\/[0-9A-F]+$/, "the token comes back ($token)");
is( $primary->safe_psql('postgres',
		"SELECT split_part('$token', ':', 2)::pg_lsn <= pg_current_wal_lsn()"),
	't', 'and is a WAL position of the primary');

# Gate and read in one query string: one transaction, one server connection.
my $read;
($rc, $read) = bounced('standby',
	"SELECT replica_gate.require_lsn('$token', 5000); SELECT v FROM counter");
is($read, "\n1", 'gate and read in one query string see the write');

# SET LOCAL gate inside an explicit transaction.
($rc, $token) = bounced('primary',
	'BEGIN; UPDATE counter SET v = 2; COMMIT; SELECT replica_gate.last_commit_token()');
($rc, $read) = bounced('standby', qq{BEGIN;
SET LOCAL replica_gate.default_timeout = 5000;
SET LOCAL replica_gate.require_lsn = '$token';
SELECT v FROM counter;
COMMIT;});
is($read, '2', 'SET LOCAL gate and read in one transaction see the write');

# Gate and read in separate transactions: they may run on different server
# connections, but replay is per server, so a read on the same standby after
# the gate returned still sees the write.
($rc, $token) = bounced('primary',
	'BEGIN; UPDATE counter SET v = 3; COMMIT; SELECT replica_gate.last_commit_token()');
my ($r1, $gate) = bounced('standby', "SELECT replica_gate.wait_for_lsn('$token', 5000)");
is($gate, 't', 'the gate in its own transaction passes');
($rc, $read) = bounced('standby', 'SELECT v FROM counter');
is($read, '3', 'gate then read in separate transactions on one standby pool');

$primary->stop;
$standby->stop;
done_testing();
