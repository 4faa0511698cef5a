# The write token: exactly the end of this session's last commit record,
# with its timeline, reported with the COMMIT as
# replica_gate.last_commit_token; the read token;
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
	primary_conf => "max_prepared_transactions = 5\n",
	standby_conf => "recovery_min_apply_delay = '300ms'\n");
$primary->safe_psql('postgres',
	'CREATE TABLE counter (v int); INSERT INTO counter VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

# --- exactness ------------------------------------------------------------
my $other = 'host=' . $primary->host . ' port=' . $primary->port . ' dbname=postgres';
my $out = $primary->safe_psql(
	'postgres', qq{
SELECT replica_gate.last_commit_lsn() IS NULL AND replica_gate.last_commit_token() IS NULL
       AS null_before_first_write;
SELECT pg_current_wal_insert_lsn() AS s \\gset
UPDATE counter SET v = 1;
SELECT pg_current_wal_insert_lsn() AS e \\gset
SELECT replica_gate.last_commit_lsn() AS t1 \\gset
SELECT replica_gate.last_commit_token() = current_setting('replica_gate.last_commit_token')
       AND replica_gate.last_commit_token() = timeline_id || ':' || :'t1'
       AS guc_matches FROM pg_control_checkpoint();
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
	"SET replica_gate.last_commit_token = '1:0/1'");
like($stderr, qr/parameter "replica_gate.last_commit_token" cannot be changed/,
	'users cannot set the token');

# COMMIT PREPARED commits from a transaction without an xid: the token
# still moves to the end of its commit record.
$out = $primary->safe_psql(
	'postgres', q{
BEGIN; UPDATE counter SET v = 42; PREPARE TRANSACTION 'rg_2pc';
SELECT coalesce(replica_gate.last_commit_token(), '') AS before \gset
SELECT pg_current_wal_insert_lsn() AS s \gset
COMMIT PREPARED 'rg_2pc';
SELECT pg_current_wal_insert_lsn() AS e \gset
SELECT replica_gate.last_commit_token() IS DISTINCT FROM :'before',
       replica_gate.last_commit_lsn() > :'s' AND replica_gate.last_commit_lsn() <= :'e',
       replica_gate.last_commit_token() = current_setting('replica_gate.last_commit_token');
SELECT replica_gate.last_commit_token();});
my ($checks, $token_2pc) = split /\n/, $out;
is($checks, 't|t|t', 'COMMIT PREPARED moves the write token, reported as well');
is( $standby->safe_psql('postgres',
		"SELECT replica_gate.require_lsn('$token_2pc', 1000); SELECT DISTINCT v FROM counter"),
	"\n42", 'a gate on the COMMIT PREPARED token sees the prepared write');
SKIP:
{
	skip 'pg_walinspect not available (PostgreSQL 15+)', 1
	  if rg_major($primary) < 15;
	is( $primary->safe_psql(
			'postgres', q{
BEGIN; UPDATE counter SET v = 43; PREPARE TRANSACTION 'rg_2pc';
SELECT pg_current_wal_insert_lsn() AS s \gset
COMMIT PREPARED 'rg_2pc';
SELECT pg_current_wal_insert_lsn() AS e \gset
SELECT replica_gate.last_commit_lsn() = end_lsn
  FROM pg_get_wal_records_info(:'s', :'e')
 WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT_PREPARED';}),
		't', 'the token is the end LSN of the COMMIT_PREPARED record');
}

# The read token: on the standby, its replay position; gating the next read
# elsewhere on it cannot go backwards.
$out = $standby->safe_psql('postgres',
	"SELECT replica_gate.seen_lsn() = pg_last_wal_replay_lsn(),
	        replica_gate.seen_token() ~ '^1:[0-9A-F]+/[0-9A-F]+\$'");
is($out, 't|t', 'read token on a standby is its replay position, with its timeline');
$out = $primary->safe_psql('postgres',
	'SELECT replica_gate.seen_lsn() >= pg_current_wal_lsn()');
is($out, 't', 'read token on a primary covers every visible commit');

# --- real clients ---------------------------------------------------------
$primary->safe_psql('postgres', 'TRUNCATE counter; INSERT INTO counter VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');

my $clients = "$FindBin::RealBin/../clients";
my $rg_client = rg_build_client('rg_client');

my %conn = (
	primary => $primary->connstr('postgres'),
	standby => $standby->connstr('postgres'),
	primary_url => 'postgresql:///postgres?host=' . $primary->host . '&port=' . $primary->port,
	standby_url => 'postgresql:///postgres?host=' . $standby->host . '&port=' . $standby->port);
my @runs = (
	[ 'libpq', [ $rg_client, $conn{primary}, $conn{standby} ] ],
	[ 'psycopg', [ '/usr/bin/python3', "$clients/rg_client.py", $conn{primary}, $conn{standby} ] ],
	[ 'node-postgres', [ 'node', "$clients/rg_client.js", $conn{primary_url}, $conn{standby_url} ] ]);

# node-postgres: in test/clients/node_modules, or where NODE_PATH points
# (.ci/install-deps installs it outside the checkout, test/run sets it).
# Missing, that client fails once, saying how to install it.
my ($node_out, $node_err) = ('', '');
my $node_ok = eval {
	IPC::Run::run([ 'node', '-e', 'require.resolve("pg", { paths: [process.argv[1]] })', $clients ],
		'>', \$node_out, '2>', \$node_err);
};

# Each client, in each gate form: a first read without a token, then
# rounds of write, token from ParameterStatus, gated read.
foreach my $run (@runs)
{
	my ($name, $cmd) = @$run;
	if ($name eq 'node-postgres' && !$node_ok)
	{
		fail('node-postgres client: '
			  . ($@ ? 'node is not installed' : 'node-postgres (pg) is not installed')
			  . ' (NODE_PATH=' . ($ENV{NODE_PATH} // '') . '): sudo bash .ci/install-deps node');
		next;
	}
	foreach my $form (qw(function set))
	{
		foreach my $case (
			# budget above the 300 ms apply delay, by less than a re-check
			# interval: every read stays on the standby if woken promptly
			[ 4, '1000', '5 reads, 5 on standby, 0 on primary', 'gated reads on the standby' ],
			# budget below it: RG001 sends every gated read to the primary
			[ 3, '20', '4 reads, 1 on standby, 3 on primary', 'RG001 falls back to the primary' ],
			# both, round after round
			[ 4, '1000,0', '5 reads, 3 on standby, 2 on primary', 'gated reads and fallbacks mixed' ])
		{
			my ($rounds, $budgets, $counts, $what) = @$case;
			$primary->safe_psql('postgres', 'UPDATE counter SET v = 0');
			$primary->wait_for_catchup($standby->name, 'replay');
			my ($o, $e) = ('', '');
			IPC::Run::run([ @$cmd, $rounds, $budgets, $form ], '>', \$o, '2>', \$e);
			is($?, 0, "$name, $form form, budgets $budgets: exit status") or diag($e);
			like($o, qr/\Q$name ($form): $counts, 0 stale\E/, "$name, $form form: $what, none stale");
		}
	}
}

$primary->stop;
$standby->stop;
done_testing();
