# Without shared_preload_libraries: no registry, no watcher; the gates still
# work, each waiting backend polling the replay position.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use IPC::Run;

my ($primary, $standby) = rg_primary_standby(preload => 0, name => 'plain');
$primary->safe_psql('postgres',
	"CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'old')");
$primary->wait_for_catchup($standby->name, 'replay');

is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'replica_gate replay watcher'"),
	'0', 'no replay watcher without preload');

$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
my $lsn = $primary->safe_psql('postgres',
	"UPDATE t SET v = 'new' WHERE id = 1; SELECT pg_current_wal_lsn()");
$primary->wait_for_catchup($standby->name, 'write');

is($standby->safe_psql('postgres', "SELECT replica_gate.caught_up('$lsn')"),
	'f', 'caught_up works without preload');
is($standby->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('$lsn', 100)"),
	'f', 'wait_for_lsn times out without preload');

my $w = rg_bg_start($standby,
	"SELECT replica_gate.wait_for_lsn('$lsn', 60000); SELECT v FROM t WHERE id = 1",
	'poller');
rg_pid_of($standby, 'poller');
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'0', 'waiters() is 0: nobody registers without preload');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($w);
is($w->{stdout}, "t\nnew", 'a polling waiter wakes after resume and sees the write');

# status() says the library is not preloaded here, and a session does not
# see replica_gate.version until the library is loaded.
is($standby->safe_psql('postgres', 'SELECT preloaded FROM replica_gate.status()'),
	'f', 'status() reports that the library is not preloaded');
my ($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT * FROM replica_gate.stats");
like($err, qr/55000: replica_gate statistics need shared memory/,
	'the statistics need the library preloaded');
# Strong reads need the question worker, which only preloading starts: they
# fail closed.
($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_lsn('primary', 500); SELECT v FROM t");
like($err, qr/RG001: could not learn the primary's position/,
	'without preload a strong read raises RG001');
like($err, qr/question worker does not run/, 'and says the question worker does not run');
is($out, '', 'and the read did not run');
is($standby->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('primary', 100), question FROM replica_gate.status()"),
	'f|off', "wait_for_lsn('primary') is false, status() shows the question off");
# Staleness needs to know that the sender is the primary, which only a
# preloaded library asks (once for the whole server): unknown here.
$primary->safe_psql('postgres', 'CREATE TABLE fresh (v int)');
$primary->wait_for_catchup($standby->name, 'replay');
is($standby->safe_psql('postgres', 'SELECT replica_gate.staleness() IS NULL'),
	't', 'staleness is unknown on a standby without preload');
($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_fresh('1 hour', 100)");
like($err, qr/RG001: .*\n.*DETAIL:  Its staleness cannot be known without shared_preload_libraries = 'replica_gate'\./,
	'require_fresh fails closed, and says why');
($ret, $out, $err) = $standby->psql('postgres', 'SHOW replica_gate.version');
like($err, qr/unrecognized configuration parameter "replica_gate.version"/,
	'a fresh session has no replica_gate.version: the library is not active in it');

# A SET before the library is loaded only makes a placeholder and does not
# wait.  Loading the library then says so, and the next gate fails.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
$lsn = $primary->safe_psql('postgres',
	"UPDATE t SET v = 'unchecked' WHERE id = 1; SELECT replica_gate.last_commit_token()");
($ret, $out, $err) = $standby->psql(
	'postgres', qq{
\\set VERBOSITY verbose
SET replica_gate.require_lsn = '$lsn';
SELECT v FROM t WHERE id = 1;
SELECT replica_gate.caught_up(NULL::pg_lsn);
SELECT replica_gate.caught_up('0/1'), 'next';}, on_error_stop => 0);
is($out, "new\nt|next", 'the SET did not wait (stale read), the first gate after it failed (even one with nothing to wait for), the next one ran');
like($err,
	qr/WARNING:  55000: SET replica_gate.require_lsn ran before replica_gate was loaded in this session, and did not wait/,
	'loading the library warns that the earlier SET did not wait');
like($err, qr/ERROR:  55000: an earlier SET replica_gate.require_lsn in this session did not wait/,
	'and the next gate of the session fails');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');

# The clients refuse to be fooled: no token reported after a write (the
# primary is not preloaded) is not "nothing to wait for", and a standby
# session that does not report replica_gate.version cannot use the SET form.
$primary->safe_psql('postgres', 'CREATE TABLE counter (v int); INSERT INTO counter VALUES (0)');
$primary->wait_for_catchup($standby->name, 'replay');
foreach my $case ([ 'function', qr/round 1: no new token reported \(None\)/ ],
	[ 'set', qr/the standby session has no replica_gate: the SET form would not wait/ ])
{
	my ($form, $why) = @$case;
	my ($o, $e) = ('', '');
	IPC::Run::run(
		[
			'/usr/bin/python3', "$FindBin::RealBin/../clients/rg_client.py",
			$primary->connstr('postgres'), $standby->connstr('postgres'), '2', '1000', $form
		],
		'>', \$o, '2>', \$e);
	isnt($?, 0, "psycopg client, $form form, without preload: refuses");
	like($e, $why, "psycopg client, $form form: says why");
}

# The SET form needs the library loaded in the session: here LOAD loads it
# first; the SET then really waits.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
$lsn = $primary->safe_psql('postgres',
	"UPDATE t SET v = 'set' WHERE id = 1; SELECT pg_current_wal_lsn()");
$w = rg_bg_start($standby,
	[
		"LOAD 'replica_gate'",
		"SET replica_gate.default_timeout = 30000; SET replica_gate.require_lsn = '$lsn'; SELECT v FROM t WHERE id = 1"
	],
	'set_poller');
rg_pid_of($standby, 'set_poller');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($w);
is($w->{stdout}, 'set', 'the SET form waits once the library is loaded');

$primary->stop;
$standby->stop;
done_testing();
