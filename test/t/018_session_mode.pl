# The session mode (replica_gate.consistency = 'strong') and the session
# token floor (replica_gate.read_after) on a real primary and standby: set
# per role, every statement that takes a new snapshot gates before it, in
# every protocol and statement form; a waiting statement holds no snapshot;
# REPEATABLE READ gates at BEGIN and refuses what it cannot gate; the SQL of
# a replication=database connection gates as well; a history
# checker over the simple and extended protocols and pipelines finds no
# stale strong read while it finds stale plain ones.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\n",
	standby_conf => "recovery_min_apply_delay = '150ms'\n");
$primary->safe_psql(
	'postgres', q{
CREATE TABLE counter (v int);
INSERT INTO counter VALUES (0);
CREATE FUNCTION read_counter() RETURNS int LANGUAGE plpgsql AS
  $$ BEGIN RETURN (SELECT v FROM counter); END $$;
-- a STABLE function the planner evaluates for its estimates, with its own
-- subtransaction (the query it runs while planning is not the statement's)
CREATE FUNCTION floor_of_counter() RETURNS int LANGUAGE plpgsql STABLE AS
  $$ BEGIN RETURN (SELECT v FROM counter) - 1000;
     EXCEPTION WHEN others THEN RETURN 0; END $$;
CREATE ROLE reader LOGIN REPLICATION;
GRANT SELECT ON counter TO reader;
SELECT lo_from_bytea(4242, 'x');
GRANT SELECT ON LARGE OBJECT 4242 TO reader;
ALTER ROLE reader SET replica_gate.consistency = 'strong';
ALTER ROLE reader SET replica_gate.default_timeout = '3s';
});
$primary->wait_for_catchup($standby->name, 'replay');
my $reader = $standby->connstr('postgres') . ' user=reader';

# psql as the reader role on the standby: (stdout, stderr)
sub as_reader
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $standby->psql('postgres', $sql,
		extra_params => [ '-U', 'reader' ]);
	return ($out, $err);
}

is((as_reader('SHOW replica_gate.consistency'))[0], 'strong',
	'the role setting applies on the standby');

# --- every statement form sees a write made just before ----------------------
my %forms = (
	'SELECT' => 'SELECT v FROM counter',
	'function at top level' => 'SELECT read_counter()',
	'EXECUTE' => 'PREPARE q AS SELECT v FROM counter; EXECUTE q',
	'DECLARE CURSOR' => 'BEGIN; DECLARE c CURSOR FOR SELECT v FROM counter; FETCH c; COMMIT',
	'COPY TO' => 'COPY counter TO STDOUT',
	'COPY (query) TO' => 'COPY (SELECT v FROM counter) TO STDOUT',
	'DO' => q{DO $$BEGIN RAISE NOTICE 'saw %', (SELECT v FROM counter); END$$},
	'REPEATABLE READ after BEGIN' =>
	  'BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT v FROM counter; COMMIT',
	'SET TRANSACTION' =>
	  'BEGIN; SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SELECT v FROM counter; COMMIT',
	'a STABLE function evaluated while planning' =>
	  'SELECT v FROM counter WHERE v > floor_of_counter()',
	'EXPLAIN ANALYZE' =>
	  q{DO $$DECLARE r text; BEGIN FOR r IN EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT v FROM counter WHERE v = (SELECT max(v) FROM counter) LOOP END LOOP; RAISE NOTICE 'saw %', (SELECT v FROM counter); END$$},
	'READ COMMITTED, second statement' =>
	  'BEGIN; SELECT 1 \g /dev/null' . "\n" . 'SELECT v FROM counter; COMMIT');
my $v = 0;
for my $form (sort keys %forms)
{
	$v++;
	$primary->safe_psql('postgres', "UPDATE counter SET v = $v");
	my ($out, $err) = as_reader($forms{$form});
	my $seen = ($out =~ /(\d+)\s*$/) ? $1 : ($err =~ /saw (\d+)/ ? $1 : 'nothing');
	is($seen, $v, "$form: sees the write made just before") or diag($err);
}

# --- paused replay: RG001 within the timeout, with its context ----------------
rg_pause_replay($standby);
$primary->safe_psql('postgres', 'UPDATE counter SET v = 100');
my $t0 = [gettimeofday];
my ($out, $err) = as_reader(
	"\\set VERBOSITY verbose\nSET replica_gate.default_timeout = '500ms'; SELECT v FROM counter");
my $elapsed = tv_interval($t0);
like($err, qr/RG001/, 'replay paused: a strong read raises RG001');
like($err, qr/CONTEXT:  gate of the statement on a standby, for replica_gate.consistency = strong/,
	'its context names the session mode');
is($out, '', 'and returns no row');
cmp_ok($elapsed, '<', 3, "within its timeout ($elapsed s for 0.5 s)");

# A walsender of a replication=database connection runs a client's SQL
# too, with the role's settings: its reads gate as a client backend's do.
{
	my ($wout, $werr) = ('', '');
	IPC::Run::run(
		[ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', "$reader replication=database",
		  '-c', "SET replica_gate.default_timeout = '500ms'", '-c', 'SELECT v FROM counter' ],
		'<', \undef, '>', \$wout, '2>', \$werr,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	like($werr, qr/RG001/,
		'replay paused: a strong read over a replication=database connection raises RG001');
	is($wout, '', 'and returns no row');
}

# A waiting strong read holds no snapshot, and sees the write once replay
# resumes.
my $bg = { out => '', err => '' };
$bg->{run} = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', "$reader application_name=waiting_reader",
	  '-c', 'SELECT v FROM counter' ],
	'<', \undef, '>', \$bg->{out}, '2>', \$bg->{err},
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
ok( $standby->poll_query_until('postgres',
		"SELECT @{[RG_IN_GATE]} FROM pg_stat_activity WHERE application_name = 'waiting_reader'"),
	'a strong read waits');
is( $standby->safe_psql('postgres',
		"SELECT backend_xmin IS NULL, backend_xid IS NULL FROM pg_stat_activity WHERE application_name = 'waiting_reader'"),
	't|t', 'while it waits it holds no snapshot (backend_xmin is NULL)');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$bg->{run}->finish;
is($bg->{out}, "100\n", 'it sees the write once replay resumes');

# Plain EXPLAIN reads nothing: it does not wait.
rg_pause_replay($standby);
$primary->safe_psql('postgres', 'UPDATE counter SET v = 100');
$t0 = [gettimeofday];
($out, $err) = as_reader('EXPLAIN (COSTS OFF) SELECT v FROM counter');
like($out, qr/Seq Scan on counter/, 'EXPLAIN without ANALYZE runs while replay is paused');
cmp_ok(tv_interval($t0), '<', 2, 'without waiting');

# A REPEATABLE READ transaction gated at BEGIN gates again when the floor
# changes before its snapshot (SET LOCAL after BEGIN, as behind a pooler).
my $later = $primary->safe_psql('postgres',
	'UPDATE counter SET v = 101; SELECT replica_gate.last_commit_token()');
(undef, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSET replica_gate.default_timeout = '300ms';\nBEGIN ISOLATION LEVEL REPEATABLE READ;\nSET LOCAL replica_gate.read_after = '$later';\nSELECT v FROM counter;\nCOMMIT;");
like($err, qr/RG001/, 'REPEATABLE READ: a floor set after BEGIN gates before the snapshot');
unlike($out, qr/^100$/m, 'and no stale row is returned');
(undef, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSET replica_gate.read_after = '0/1';\nBEGIN ISOLATION LEVEL REPEATABLE READ;\nSET TRANSACTION SNAPSHOT '00000003-00000002-1';\nCOMMIT;");
like($err, qr/0A000: SET TRANSACTION SNAPSHOT cannot be gated/,
	'an imported snapshot is refused (0A000)');

$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
$primary->wait_for_catchup($standby->name, 'replay');
rg_pause_replay($standby);

# --- REPEATABLE READ that cannot be gated: refused ------------------------------
($out, $err) = as_reader(
	"\\set VERBOSITY verbose\nSET default_transaction_isolation = 'repeatable read'; SELECT v FROM counter");
like($err, qr/25001: this REPEATABLE READ or SERIALIZABLE transaction was not gated before its snapshot/,
	'an implicit REPEATABLE READ transaction is refused (25001), never run ungated');

# --- a fast-path call (PQfn: the large-object API) cannot be gated: refused ----
# (replay running: libpq's query before the call is gated too, and with
# replay paused a record the idle primary writes now and then, such as its
# running transactions every 15 s, made it time out before the call)
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
my $fastpath = rg_build_client('rg_fastpath');
like(`$fastpath "$reader" 4242`,
	qr/^refused: ERROR:  replica_gate cannot gate a fast-path function call/,
	'a fast-path call in the session mode is refused, never run ungated');
is(`$fastpath "@{[ $standby->connstr('postgres') . ' user=reader options=-creplica_gate.consistency=eventual' ]}" 4242`,
	"opened\n", 'the same call in eventual mode runs');

# --- read_after: a session token floor ------------------------------------------
rg_pause_replay($standby);
my $token = $primary->safe_psql('postgres',
	'UPDATE counter SET v = 200; SELECT replica_gate.last_commit_token()');
is( $standby->safe_psql('postgres',
		"SET replica_gate.read_after = '$token'; SHOW replica_gate.read_after"),
	$token, 'SET replica_gate.read_after returns at once on a standby behind it');
is($primary->safe_psql('postgres', "SET replica_gate.read_after = '$token'; SELECT v FROM counter"),
	'200', 'and on the primary, where reads pass');
my ($ret, $pout, $perr) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSET replica_gate.default_timeout = '300ms'; SET replica_gate.read_after = '$token'; SELECT v FROM counter");
like($perr, qr/RG001: timed out after 300 ms waiting for target \Q$token\E to be replayed/,
	'the next read raises RG001 while the standby is behind the floor');
like($perr, qr/CONTEXT:  gate of the statement on a standby, for replica_gate.read_after/,
	'its context names the floor');
is( $standby->safe_psql('postgres',
		"SET replica_gate.read_after = '$token'; RESET replica_gate.read_after; SELECT v FROM counter"),
	'101', 'after RESET reads are plain again (stale here)');
is( $standby->safe_psql('postgres',
		"SET replica_gate.read_after = '$token'; DISCARD ALL; SELECT v FROM counter"),
	'101', 'DISCARD ALL resets the floor');
$bg = rg_bg_start($standby,
	[ "SET replica_gate.default_timeout = '10s'", "SET replica_gate.read_after = '$token'",
	  'SELECT 1', 'SELECT v FROM counter' ], 'floor_reader');
ok( $standby->poll_query_until('postgres',
		"SELECT @{[RG_IN_GATE]} FROM pg_stat_activity WHERE application_name = 'floor_reader'"),
	'a read under the floor waits');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($bg);
is($bg->{stdout}, "1\n200", 'and sees the write once replayed; every later statement is gated too');

# --- history checker --------------------------------------------------------------
my @cmd = ('/usr/bin/python3', "$FindBin::RealBin/../clients/rg_history.py",
	$primary->connstr('postgres'), $reader, 6,
	'simple:role', 'prepared:role', 'pipeline:role', 'simple:eventual', 'prepared:eventual');
my ($hout, $herr) = ('', '');
IPC::Run::run(\@cmd, '>', \$hout, '2>', \$herr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
note($hout);
diag($herr) if $herr;
for my $line (split /\n/, $hout)
{
	my ($kind, $reads, $violations, $failed) =
	  $line =~ /"reader": "([^"]+)", "reads": (\d+), "violations": (\d+), "failed": (\d+)/
	  or next;
	if ($kind =~ /:role$/)
	{
		cmp_ok($reads, '>', 20, "$kind: strong reads ran ($reads, $failed refused)");
		is($violations, 0, "$kind: no strong read missed a write acknowledged before it began")
		  or diag($line);
	}
	else
	{
		cmp_ok($violations, '>', 0,
			"$kind: plain reads miss writes ($violations of $reads): the checker can fail");
	}
}
like($hout, qr/simple:role.*\n.*prepared:role.*\n.*pipeline:role/, 'every reader reported');

# --- another extension's background worker, as a role in the session mode ---------
# It reads through SPI outside any client statement: not gated, not refused.
{
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	my $includes = `$pg_config --includedir-server`;
	chomp $includes;
	my $lib = PostgreSQL::Test::Utils::tempdir . '/rg_spi_worker.so';
	system('cc', '-shared', '-fPIC', '-Wall', '-Werror', '-o', $lib,
		"$FindBin::RealBin/../modules/rg_spi_worker.c", "-I$includes") == 0
	  or BAIL_OUT('cannot build the test module rg_spi_worker');
	$primary->safe_psql('postgres',
		"CREATE FUNCTION rg_spi_worker_start(role text, library text) RETURNS void "
		  . "AS '$lib', 'rg_spi_worker_start' LANGUAGE C");
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
	$primary->wait_for_catchup($standby->name, 'replay');
	my $offset = -s $standby->logfile;
	$standby->safe_psql('postgres', "SELECT rg_spi_worker_start('reader', '$lib')");
	ok($standby->wait_for_log(qr/rg_spi_worker read \d+|ERROR:/, $offset),
		'a background worker ran as the reader role');
	my $log = PostgreSQL::Test::Utils::slurp_file($standby->logfile, $offset);
	like($log, qr/rg_spi_worker read \d+/,
		'a background worker of another extension reads as a role in the session mode');
	unlike($log, qr/cannot gate a fast-path function call/, 'and is not refused as a fast-path call');
}

is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'), '0', 'no waiter left');
done_testing();
