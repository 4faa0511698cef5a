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

# --- the session mode and the token floor without preload ---------------------
# The way to turn the mode on for a role loads the library in its sessions
# (local_preload_libraries, which make install links into $libdir/plugins)
# with it, on every node: then a strong read on this standby, which has no
# question worker, fails closed (RG001), whether the settings come from the
# role (directly or through pgbouncer) or from the connection (PGOPTIONS).
$primary->safe_psql('postgres', q{
CREATE ROLE loaded LOGIN;
ALTER ROLE loaded SET local_preload_libraries = 'replica_gate';
ALTER ROLE loaded SET replica_gate.consistency = 'strong';
ALTER ROLE loaded SET replica_gate.default_timeout = '500ms';
CREATE ROLE unloaded LOGIN;
ALTER ROLE unloaded SET replica_gate.consistency = 'strong';
GRANT SELECT ON t TO loaded, unloaded;
});
$primary->wait_for_catchup($standby->name, 'replay');
my $as = sub { $standby->connstr('postgres') . " user=$_[0]" };
my $psql = sub {
	my ($dsn, @sql) = @_;
	my ($o, $e) = ('', '');
	IPC::Run::run([ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $dsn,
			map { ('-c', $_) } @sql ], '>', \$o, '2>', \$e);
	chomp $o;
	return ($o, $e);
};

is(($psql->($as->('loaded') . ' options=-creplica_gate.consistency=eventual',
			'SELECT preloaded, strong_reads, loaded_at_start FROM replica_gate.status()'))[0],
	'f|f|t', 'status() on the standby, as the role: not preloaded, no strong reads here, the library loaded at session start');
is(($psql->($as->('unloaded'), 'SELECT loaded_at_start FROM replica_gate.status()'))[0],
	'f', 'status() in a session that loaded the library by calling it: not loaded at start');
is($primary->safe_psql('postgres', 'SELECT strong_reads FROM replica_gate.status()'),
	't', 'status() on the primary: strong reads are served');

rg_pause_replay($standby);
$primary->safe_psql('postgres', "UPDATE t SET v = 'unseen' WHERE id = 1");
my $dir = PostgreSQL::Test::Utils::tempdir_short;
my $bport = rg_pgbouncer($dir, [ 'loaded', 'unloaded' ], standby => $standby);
local $ENV{PGMAXPROTOCOLVERSION} = '3.0';    # Debian 12's pgbouncer
my %ways = (
	'ALTER ROLE' => $as->('loaded'),
	'PGOPTIONS' => $standby->connstr('postgres')
	  . q{ options='-c local_preload_libraries=replica_gate -c replica_gate.consistency=strong'},
	'pgbouncer, the role setting' => "host=$dir port=$bport dbname=standby user=loaded");
for my $way (sort keys %ways)
{
	my ($o, $e) = $psql->($ways{$way}, 'SELECT v FROM t WHERE id = 1');
	like($e, qr/RG001: could not learn the primary's position/,
		"$way: a strong read on a standby without preload raises RG001");
	is($o, '', "$way: and returns no row, never the stale one");
}

# The token floor needs no question: with the library loaded at session
# start (PGOPTIONS here) a read under it waits, polling, and sees the write.
my $token = $primary->safe_psql('postgres',
	"UPDATE t SET v = 'floor' WHERE id = 1; SELECT replica_gate.last_commit_token()");
my ($fo, $fe) = ('', '');
my $fh = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $standby->connstr('postgres')
		  . qq{ application_name=floor_reader options='-c local_preload_libraries=replica_gate -c replica_gate.read_after=$token -c replica_gate.default_timeout=60s'},
	  '-c', 'SELECT v FROM t WHERE id = 1' ],
	'>', \$fo, '2>', \$fe);
rg_pid_of($standby, 'floor_reader');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$fh->finish;
is($fo, "floor\n", 'PGOPTIONS: a read under replica_gate.read_after waits and sees the write') or diag($fe);

# Without the library setting, the mode cannot hold where the library is not
# preloaded, and the client can tell at connection start: the server
# reports the mode (ParameterStatus) only where the library is loaded.  Once
# the library gets loaded in such a session, it warns, and the next
# statement fails rather than pretend the earlier ones were gated.
my $reported = q{
import sys, psycopg
with psycopg.connect(sys.argv[1]) as c:
    print(c.info.parameter_status("replica_gate.consistency"))
};
my ($ro, $re) = ('', '');
IPC::Run::run([ '/usr/bin/python3', '-c', $reported, $as->('loaded') ], '>', \$ro, '2>', \$re);
is($ro, "strong\n", 'with the library setting, the mode is reported at connection start') or diag($re);
IPC::Run::run([ '/usr/bin/python3', '-c', $reported, $as->('unloaded') ], '>', \$ro, '2>', \$re);
is($ro, "None\n", 'without it, it is not: the client can refuse the session') or diag($re);
rg_pause_replay($standby);
$primary->safe_psql('postgres', "UPDATE t SET v = 'missed' WHERE id = 1");
my ($mo, $me) = $psql->($as->('unloaded'), 'SELECT v FROM t WHERE id = 1',
	'SELECT replica_gate.caught_up(NULL::pg_lsn)', 'SELECT v FROM t WHERE id = 1');
is($mo, "floor\nt", 'the read before the library was loaded was not gated (stale); the one after did not run');
like($me, qr/WARNING:  55000: replica_gate.consistency or replica_gate.read_after was set before replica_gate was loaded in this session/,
	'loading the library warns');
like($me, qr/ERROR:  55000: earlier statements of this session were not gated/,
	'and the next statement fails');
like($me, qr/^CONTEXT:  gate of the statement on a standby, for replica_gate\.consistency = strong$/m,
	'its context names the setting');
# The same with the floor set (by SET) before the library was loaded.
my $floor_lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
($mo, $me) = $psql->($standby->connstr('postgres'),
	"SET replica_gate.read_after = '$floor_lsn'",
	'SELECT replica_gate.caught_up(NULL::pg_lsn)', 'SELECT v FROM t WHERE id = 1');
is($mo, 't', 'read_after set before the library was loaded: the statement after the loading one did not run');
like($me, qr/ERROR:  55000: earlier statements of this session were not gated\n(?:.*\n)*?CONTEXT:  gate of the statement on a standby, for replica_gate\.read_after$/m,
	'it fails 55000, and its context names the floor');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');

# replica_gate.commit_wait in the configuration of a server that does not
# preload the library (doc/setup.md puts it there): a session that loads
# the library gets no WARNING (it got "invalid configuration parameter
# name ..., removing it" in each such session), SHOW says the setting is
# not in effect, and pg_settings, where a standby's question looks for the
# primary's commit wait, has no such row: the standby asks for every strong
# read (fail closed).
$standby->append_conf('postgresql.conf', "replica_gate.commit_wait = '20ms'");
$standby->reload;
($ret, $out, $err) = $standby->psql('postgres',
	"SELECT replica_gate.caught_up(NULL::pg_lsn); SHOW replica_gate.commit_wait; "
	  . "SELECT count(*) FROM pg_settings WHERE name = 'replica_gate.commit_wait'");
is($err, '', 'commit_wait in the file, library loaded by a session: no warning');
is($out, "t\n20ms (not in effect: replica_gate is not in shared_preload_libraries)\n0",
	'SHOW says it is not in effect; pg_settings does not list it');
is($standby->safe_psql('postgres',
		'SELECT preloaded, commit_wait FROM replica_gate.status()'),
	'f|', 'status(): not preloaded, no commit wait learned');

$primary->stop;
$standby->stop;
done_testing();
