# The write token: exactly the end of this session's last commit record,
# reported with the COMMIT as replica_gate.last_commit_lsn; the read token;
# and real clients (libpq, psycopg, node-postgres) using it to gate reads on
# a standby, with a fallback to the primary.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $standby) = rg_primary_standby(
	standby_conf => "recovery_min_apply_delay = '300ms'\n");
$primary->safe_psql('postgres',
	'CREATE TABLE counter (v int); INSERT INTO counter VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

# --- exactness ------------------------------------------------------------
my $other = 'host=' . $primary->host . ' port=' . $primary->port . ' dbname=postgres';
my $out = $primary->safe_psql(
	'postgres', qq{
SELECT replica_gate.last_commit_lsn() IS NULL AS null_before_first_write;
SELECT pg_current_wal_insert_lsn() AS s \\gset
UPDATE counter SET v = 1;
SELECT pg_current_wal_insert_lsn() AS e \\gset
SELECT replica_gate.last_commit_lsn() AS t1 \\gset
SELECT :'t1' = current_setting('replica_gate.last_commit_lsn') AS guc_matches;
\\! psql -X -q -d "$other" -c 'UPDATE counter SET v = 2'
SELECT count(*) FROM counter;
BEGIN; UPDATE counter SET v = 3; ROLLBACK;
SELECT replica_gate.last_commit_lsn() = :'t1' AS unchanged,
       pg_current_wal_lsn() > :'t1' AS others_wrote,
       :'t1'::pg_lsn > :'s' AND :'t1'::pg_lsn <= :'e' AS within_the_write;
});
is($out, "t\nt\n1\nt|t|t",
	'token: NULL before the first write; unchanged by other sessions, reads and rollbacks');

SKIP:
{
	my ($ret) = $primary->psql('postgres', 'CREATE EXTENSION pg_walinspect');
	skip 'pg_walinspect not available (PostgreSQL 15+)', 1 if $ret != 0;
	is( $primary->safe_psql(
			'postgres', q{
SELECT pg_current_wal_insert_lsn() AS s \gset
INSERT INTO counter SELECT 1;
SELECT pg_current_wal_insert_lsn() AS e \gset
SELECT replica_gate.last_commit_lsn() = end_lsn
  FROM pg_get_wal_records_info(:'s', :'e')
 WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT';}),
		't',
		'the token is the end LSN of the transaction\'s COMMIT record');
}

my ($ret, $stdout, $stderr) = $primary->psql('postgres',
	"SET replica_gate.last_commit_lsn = '0/1'");
like($stderr, qr/parameter "replica_gate.last_commit_lsn" cannot be changed/,
	'users cannot set the token');

# The read token: on the standby, its replay position; gating the next read
# elsewhere on it cannot go backwards.
$out = $standby->safe_psql('postgres',
	'SELECT replica_gate.seen_lsn() = pg_last_wal_replay_lsn()');
is($out, 't', 'read token on a standby is its replay position');
$out = $primary->safe_psql('postgres',
	'SELECT replica_gate.seen_lsn() >= pg_current_wal_lsn()');
is($out, 't', 'read token on a primary covers every visible commit');

# --- real clients ---------------------------------------------------------
$primary->safe_psql('postgres', 'TRUNCATE counter; INSERT INTO counter VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

my $clients = "$FindBin::RealBin/../clients";
my $bin = PostgreSQL::Test::Utils::tempdir;
my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
my $incdir = `$pg_config --includedir`;
my $libdir = `$pg_config --libdir`;
chomp($incdir, $libdir);
system('cc', '-Wall', '-Werror', '-o', "$bin/rg_client", "$clients/rg_client.c",
	"-I$incdir", "-L$libdir", '-lpq') == 0
  or BAIL_OUT('cannot build the libpq client');

my %conn = (
	primary => $primary->connstr('postgres'),
	standby => $standby->connstr('postgres'),
	primary_url => 'postgresql:///postgres?host=' . $primary->host . '&port=' . $primary->port,
	standby_url => 'postgresql:///postgres?host=' . $standby->host . '&port=' . $standby->port);
my @runs = (
	[ 'libpq', [ "$bin/rg_client", $conn{primary}, $conn{standby} ] ],
	[ 'psycopg', [ '/usr/bin/python3', "$clients/rg_client.py", $conn{primary}, $conn{standby} ] ],
	[ 'node-postgres', [ 'node', "$clients/rg_client.js", $conn{primary_url}, $conn{standby_url} ] ]);

foreach my $run (@runs)
{
	my ($name, $cmd) = @$run;

	# Budget above the apply delay: every read stays on the standby.
	my ($o, $e) = ('', '');
	IPC::Run::run([ @$cmd, '10', '5000' ], '>', \$o, '2>', \$e);
	is($?, 0, "$name: exit status with a generous budget") or diag($e);
	like($o, qr/10 reads, 10 on standby, 0 on primary, 0 stale/,
		"$name: token from ParameterStatus, gated reads on the standby, none stale");

	# Budget below the apply delay: every read falls back to the primary.
	($o, $e) = ('', '');
	IPC::Run::run([ @$cmd, '5', '20' ], '>', \$o, '2>', \$e);
	is($?, 0, "$name: exit status with a short budget") or diag($e);
	like($o, qr/5 reads, 0 on standby, 5 on primary, 0 stale/,
		"$name: RG001 sends every read to the primary, none stale");
}

$primary->stop;
$standby->stop;
done_testing();
