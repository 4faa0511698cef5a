# Gating reads on a real streaming standby: apply delay, timeouts, paused
# replay, cancellation, statement_timeout, many concurrent waiters, and the
# REPEATABLE READ rules.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval);

my ($primary, $standby) = rg_primary_standby();

$primary->safe_psql('postgres',
	'CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, \'old\')');
$primary->wait_for_catchup($standby->name, 'replay');

# Set recovery_min_apply_delay on the standby.
sub set_delay
{
	my ($delay) = @_;
	$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '$delay'");
	$standby->reload;
}

# Write on the primary, return the write's token.
sub write_value
{
	my ($v) = @_;
	return $primary->safe_psql('postgres',
		"UPDATE t SET v = '$v' WHERE id = 1; SELECT replica_gate.last_commit_token()");
}

# The watcher is running on the standby (13-18); 19+ waits in core's registry.
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'replica_gate replay watcher'"),
	rg_core_wait($standby) ? '0' : '1',
	'replay watcher runs on the standby before 19, not from 19 on');
ok( $primary->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'replica_gate replay watcher'"),
	'no replay watcher holds a worker slot on the primary');

# --- apply delay: a stale read next to a gated one -------------------------
set_delay('3s');
my $lsn = write_value('new');
is($standby->safe_psql('postgres', "SELECT replica_gate.caught_up('$lsn')"),
	'f', 'caught_up is false while the commit is delayed');
is($standby->safe_psql('postgres', 'SELECT v FROM t WHERE id = 1'),
	'old', 'an ungated read right after the write is stale');

my $t0 = [gettimeofday];
# Budgets of 3.5 s: the delay ends 3 s after the commit, and a waiter woken
# late (by a re-check instead of its wake-up) would run out of time.
my $gated = $standby->safe_psql('postgres',
	"SELECT replica_gate.require_lsn('$lsn', 3500); SELECT v FROM t WHERE id = 1");
my $waited = tv_interval($t0);
is($gated, "\nnew", 'gate and read in one query string see the write');
cmp_ok($waited, '>=', 1.0, "the gate waited for the delayed commit (${waited}s)");
is($standby->safe_psql('postgres', "SELECT replica_gate.caught_up('$lsn')"),
	't', 'caught_up is true after replay');

# wait_for_lsn in its own statement, then the read.
$lsn = write_value('newer');
is( $standby->safe_psql('postgres',
		"SELECT replica_gate.wait_for_lsn('$lsn', 3500); SELECT v FROM t WHERE id = 1"),
	"t\nnewer",
	'wait_for_lsn returns true, the next statement sees the write');

# The SET form as the first statement of a REPEATABLE READ transaction.
$lsn = write_value('rr');
is( $standby->safe_psql(
		'postgres', qq{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL replica_gate.default_timeout = 3500;
SET LOCAL replica_gate.require_lsn = '$lsn';
SHOW replica_gate.require_lsn;
SELECT v FROM t WHERE id = 1;
COMMIT;
SHOW replica_gate.require_lsn;}),
	"$lsn\nrr\n",
	'SET LOCAL gate opens a REPEATABLE READ transaction that sees the write; the value ends with it');
set_delay('0');
$primary->wait_for_catchup($standby->name, 'replay');

# --- timeouts ----------------------------------------------------------------
$t0 = [gettimeofday];
is( $standby->safe_psql('postgres',
		"SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 200)"),
	'f', 'unreachable target: wait_for_lsn returns false');
$waited = tv_interval($t0);
cmp_ok($waited, '>=', 0.2, "it waited its timeout (${waited}s)");

is($standby->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 0)"),
	'f', 'timeout 0 checks once');

my ($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_lsn('FFFFFFFF/FFFFFFFF', 100); SELECT 'read ran'");
isnt($ret, 0, 'require_lsn fails on timeout');
unlike($out, qr/read ran/, 'the read after a failed gate in the same query string did not run');
like($err, qr/ERROR:  RG001: timed out after 100 ms waiting for target FFFFFFFF\/FFFFFFFF to be replayed/,
	'require_lsn raises RG001 naming the target');
like($err, qr/DETAIL:  The last replayed LSN is [0-9A-F]+\/[0-9A-F]+\./,
	'and the replay position');

# LSNs in messages print exactly as this server's pg_lsn output does (19
# zero-pads the low half).
my ($lsn_text, $replay_text) = split /\|/, $standby->safe_psql('postgres',
	"SELECT 'FFFFFFFF/1'::pg_lsn::text, pg_last_wal_replay_lsn()::text");
($ret, $out, $err) = $standby->psql('postgres',
	"SELECT replica_gate.require_lsn('FFFFFFFF/1', 0)");
like($err, qr/timed out after 0 ms waiting for target \Q$lsn_text\E to be replayed/,
	"the target prints as pg_lsn does ($lsn_text)");
like($err, qr/The last replayed LSN is \Q$replay_text\E\./,
	"so does the replay position ($replay_text)");

# In one session: a SET that passed, one that timed out, then SHOW.
($ret, $out, $err) = $standby->psql(
	'postgres', qq{
SET replica_gate.default_timeout = 100;
SET replica_gate.require_lsn = '$lsn';
SET replica_gate.require_lsn = 'FFFFFFFF/FFFFFFFF';
SHOW replica_gate.require_lsn;}, on_error_stop => 0);
like($err, qr/timed out after 100 ms waiting for target FFFFFFFF\/FFFFFFFF to be replayed/,
	'SET form raises the same error on timeout');
is($out, $lsn, 'a failed SET leaves the value of the last SET that passed');

$t0 = [gettimeofday];
is( $standby->safe_psql('postgres',
		"SET replica_gate.max_timeout = 300; SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 100000)"),
	'f', 'a huge timeout is capped by max_timeout');
$waited = tv_interval($t0);
ok($waited >= 0.3 && $waited < 3, "the capped wait lasted max_timeout (${waited}s)");

# A NULL timeout means default_timeout; both are cut to max_timeout.
$t0 = [gettimeofday];
is( $standby->safe_psql('postgres',
		"SET replica_gate.default_timeout = 400; SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', NULL)"),
	'f', 'NULL timeout: wait_for_lsn waits default_timeout');
$waited = tv_interval($t0);
ok($waited >= 0.4 && $waited < 3, "it waited default_timeout (${waited}s)");
$t0 = [gettimeofday];
$standby->safe_psql('postgres',
	"SET replica_gate.max_timeout = 300; SET replica_gate.default_timeout = 60000; "
	  . "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF')");
$waited = tv_interval($t0);
ok($waited >= 0.3 && $waited < 3, "default_timeout is cut to max_timeout too (${waited}s)");

# A gate that timed out after a timeout cut to max_timeout says so (it said
# only "timed out after 300 ms"); one that was not cut does not.
($ret, $out, $err) = $standby->psql('postgres',
	"SET replica_gate.max_timeout = 300; SELECT replica_gate.require_lsn('FFFFFFFF/FFFFFFFF', 2147483647)");
like($err, qr/ERROR:  timed out after 300 ms waiting for target FFFFFFFF\/FFFFFFFF to be replayed\n(?:.*\n)*HINT:  Run the read on the primary\. The timeout asked for, 2147483647 ms, was cut to replica_gate\.max_timeout \(300 ms\); a superuser can raise it\./,
	'a timeout cut to max_timeout: the hint names it');
($ret, $out, $err) = $standby->psql('postgres',
	"SET replica_gate.max_timeout = 300; SELECT replica_gate.require_lsn('FFFFFFFF/FFFFFFFF', 300)");
like($err, qr/HINT:  Run the read on the primary, or wait longer\./,
	'a timeout not cut: the usual hint');

# A token of a timeline this standby has not reached: the detail names the
# standby's timeline (it named only an LSN past the target's).
($ret, $out, $err) = $standby->psql('postgres',
	"SELECT replica_gate.require_lsn('2:0/1', 100)");
like($err, qr/ERROR:  timed out after 100 ms waiting for target 2:0\/0*1 to be replayed\nDETAIL:  This standby is on timeline 1, not yet on the target's timeline 2; the last replayed LSN is [0-9A-F]+\/[0-9A-F]+\./,
	'a token of a newer timeline: the detail names the standby\'s timeline');

# --- paused replay -----------------------------------------------------------
rg_pause_replay($standby);
$lsn = write_value('paused');
$primary->wait_for_catchup($standby->name, 'write');

$t0 = [gettimeofday];
is($standby->safe_psql('postgres', "SELECT replica_gate.wait_for_lsn('$lsn', 300)"),
	'f', 'paused replay: wait ends at its timeout');
$waited = tv_interval($t0);
cmp_ok($waited, '<', 30, "paused replay did not stretch the wait (${waited}s)");

# An empty SET value means no token: it returns at once, even here.
$t0 = [gettimeofday];
is( $standby->safe_psql('postgres',
		"SET replica_gate.default_timeout = 5000; SET replica_gate.require_lsn = ''; SELECT v FROM t WHERE id = 1"),
	'rr', 'an empty SET value does not wait (and the read is stale, as without a gate)');
$waited = tv_interval($t0);
cmp_ok($waited, '<', 2, "it did not wait for its 5 s budget (${waited}s)");

# The token's LSN alone (rg_token_lsn), as the crowd below.
my $w = rg_bg_start($standby,
	[ rg_woke_at("replica_gate.wait_for_lsn('" . rg_token_lsn($lsn) . "', 60000)"),
	  'SELECT v FROM t WHERE id = 1' ],
	'paused_waiter');
my $pid = rg_pid_of($standby, 'paused_waiter');
my $event = $standby->safe_psql('postgres',
	"SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE pid = $pid");
like($event,
	rg_core_wait($standby)
	? qr/^(IPC|Client):WaitForWalReplay$/
	: qr/^Extension:(Extension|ReplicaGateWaitReplay)$/,
	"pg_stat_activity shows the wait ($event)");
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'1', 'one backend registered');
my $probe = rg_probe_start($standby, $lsn, 'paused_probe');
my $queued = (rg_schedstat($pid))[1];
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
my $passed = rg_probe_time($probe);
rg_bg_finish($w);
my ($woke, $read) = $w->{stdout} =~ /^t\n(\S+)\n(.*)$/;
is($read, 'paused', 'waiter across pause/resume wakes and sees the write');
my ($lag, $in_queue) = rg_wake_lag($woke, $passed, $queued);
cmp_ok($lag, '<', RG_WAKE_BOUND_MS,
	sprintf('it returned %.1f ms after replay passed its target, besides %.1f ms waiting for a CPU',
		$lag, $in_queue));
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'0', 'no waiter left registered');

# --- 200 concurrent waiters ---------------------------------------------------
rg_pause_replay($standby);
$lsn = write_value('crowd');
# Each waiter runs the gate and one more statement in one query string (\;),
# the gate first, so that it is its statement's only work and sleeps on its
# latch.  The standby logs when each query string ended (its "duration"
# line, under log_min_duration_statement = 0 and application name crowd):
# that is when the waiter returned, noted without a process per client (a
# \shell command forks one for each, and one that fails aborts a client
# whose gate had passed, which then counts as a failed waiter).
# The gates' budget outlasts the wait for all 200 to arrive (timeout_default
# at most), and max_timeout is raised for them to allow it: a client that
# fails or comes late shows as itself, not as 199 others timing out after
# 60 s while the test still waits for the 200th.
my $crowd_budget = 2 * $PostgreSQL::Test::Utils::timeout_default;
my $script = $standby->basedir . '/crowd.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"SELECT replica_gate.require_lsn('" . rg_token_lsn($lsn) . "', ${crowd_budget}000) \\; "
	  . "SELECT extract(epoch FROM clock_timestamp())\n");
my ($pb_out, $pb_err) = ('', '');
my $crowd_log = -s $standby->logfile;
my $pgbench;
{
	local $ENV{PGAPPNAME} = 'crowd';
	local $ENV{PGOPTIONS} =
	  "-c log_min_duration_statement=0 -c replica_gate.max_timeout=${crowd_budget}000";
	$pgbench = IPC::Run::start(
		[
			'pgbench', '-n', '-c', '200', '-j', '2', '-t', '1', '-f', $script,
			'-h', $standby->host, '-p', $standby->port, 'postgres'
		],
		'>', \$pb_out, '2>', \$pb_err,
		IPC::Run::timeout($crowd_budget));
}
ok( $standby->poll_query_until('postgres', 'SELECT replica_gate.waiters() = 200'),
	'200 backends wait')
  or do { eval { $pgbench->pump_nb }; diag(
	$standby->safe_psql(
		'postgres', q{
SELECT replica_gate.waiters(), pg_last_wal_replay_lsn(), pg_is_wal_replay_paused();
SELECT state, wait_event, count(*) FROM pg_stat_activity
 WHERE backend_type = 'client backend' GROUP BY 1, 2 ORDER BY 1, 2;}),
	"\npgbench: $pb_err") };
# The crowd's lateness counts from the resume (no probe: a session spinning
# next to 200 waking backends gets the CPU late, and would then note replay
# passing late, not early).  Replay passes the target after the resume, so
# this can only make the crowd look later than it was.
my $resumed = $standby->safe_psql('postgres',
	'SELECT extract(epoch FROM clock_timestamp()) FROM (SELECT pg_wal_replay_resume()) r');
# A waiter that no wake-up reaches keeps pgbench running past its timeout.
my $finished = eval { $pgbench->finish; 1 };
$pgbench->kill_kill unless $finished;
my $crowd_lines = substr(slurp_file($standby->logfile), $crowd_log);
ok($finished && $pgbench->result(0) == 0, 'pgbench with 200 waiters succeeded')
  or diag($finished ? '' : "pgbench timed out after ${crowd_budget}s\n",
	"pgbench: $pb_err\nthe standby's errors since pgbench started:\n",
	grep { /ERROR|FATAL/ } split /^/, $crowd_lines);
like($pb_out, qr/number of transactions actually processed: 200\/200/,
	'all 200 waiters returned');
# Waking 200 backends on 2 cores takes a few ms (bench/README.md), but each
# then finishes its statement and runs the next before it returns: about
# 0.7 ms of CPU each, so the last one returns 70 to 300 ms after the resume
# here.  These waiters sleep on their latch until woken or until their
# budget ends, so one that no wake-up reaches returns minutes late (or
# pgbench times out): the bound leaves a slow machine several times what it
# needs and still fails such a build.  The log's times are in milliseconds,
# in log_timezone (log_line_prefix starts with them); the server turns the
# last into epoch seconds.
my @woke = sort $crowd_lines =~
  /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) .*? crowd LOG:  duration: /mg;
is(scalar(@woke), 200, 'the standby logged when each of the 200 returned');
my $last = @woke ? $standby->safe_psql('postgres',
	"SELECT extract(epoch FROM '$woke[-1]'::timestamp AT TIME ZONE current_setting('log_timezone'))")
  : 'inf';
cmp_ok($last - $resumed, '<', 2,
	sprintf('the last of the 200 returned %.1f ms after replay resumed',
		($last - $resumed) * 1000));
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'0', 'none left registered');

# --- cancel, terminate, statement_timeout -------------------------------------
$w = rg_bg_start($standby, "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000)",
	'cancelled');
$pid = rg_pid_of($standby, 'cancelled');
$standby->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
rg_bg_finish($w);
like($w->{stderr}, qr/57014: canceling statement due to user request/,
	'pg_cancel_backend ends a wait');
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'0', 'a cancelled waiter leaves nothing behind');

$w = rg_bg_start($standby, "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000)",
	'terminated');
$pid = rg_pid_of($standby, 'terminated');
$standby->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
rg_bg_finish($w);
like($w->{stderr}, qr/terminating connection due to administrator command/,
	'pg_terminate_backend ends a wait');
ok($standby->poll_query_until('postgres', 'SELECT replica_gate.waiters() = 0'),
	'a terminated waiter leaves nothing behind');

$w = rg_bg_start($standby,
	"SET statement_timeout = 300; SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000)",
	'stmt_timeout');
rg_bg_finish($w);
like($w->{stderr}, qr/57014: canceling statement due to statement timeout/,
	'statement_timeout ends a wait');
cmp_ok($w->{elapsed}, '<', 30, "well before the gate's own timeout ($w->{elapsed}s)");

# An error caught by a subtransaction (plpgsql EXCEPTION block) unlinks too,
# and the same session can wait again.
is( $standby->safe_psql(
		'postgres', q{
SET statement_timeout = 200;
DO $$ BEGIN
	PERFORM replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000);
EXCEPTION WHEN query_canceled THEN NULL;
END $$;
RESET statement_timeout;
SELECT replica_gate.waiters();
SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 50);}),
	"0\nf",
	'a wait aborted inside a subtransaction leaves nothing behind');

# A new waiter still wakes normally after all that.
rg_pause_replay($standby);
$lsn = write_value('after');
$w = rg_bg_start($standby, "SELECT replica_gate.wait_for_lsn('$lsn', 60000)", 'after');
rg_pid_of($standby, 'after');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($w);
is($w->{stdout}, 't', 'later waiters are still woken');

# --- the SET form must open its transaction --------------------------------
# Locks taken by earlier statements would stay held during the wait, and
# replay of a conflicting lock record would wait for us.
($ret, $out, $err) = $standby->psql('postgres', qq{
\\set VERBOSITY verbose
BEGIN;
SELECT count(*) FROM t;
SET LOCAL replica_gate.require_lsn = '$lsn';});
like($err, qr/25001: SET replica_gate.require_lsn must be the first statement of its transaction/,
	'READ COMMITTED: the SET form after an earlier statement is refused');

# --- REPEATABLE READ ------------------------------------------------------------
($ret, $out, $err) = $standby->psql('postgres', qq{
\\set VERBOSITY verbose
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT 1;
SELECT replica_gate.wait_for_lsn('$lsn', 100);});
like($err,
	qr/25001: replica_gate.wait_for_lsn\(\) cannot be used after the transaction snapshot was taken/,
	'REPEATABLE READ: a gate after the snapshot was taken is refused');

($ret, $out, $err) = $standby->psql('postgres', qq{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT replica_gate.caught_up('$lsn');});
like($err, qr/cannot be used after the transaction snapshot was taken/,
	'so is caught_up, whose statement fixes the snapshot');

($ret, $out, $err) = $standby->psql('postgres', qq{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT 1;
SET LOCAL replica_gate.require_lsn = '$lsn';});
like($err, qr/SET replica_gate.require_lsn must be the first statement of its transaction/,
	'and so is the SET form after the first statement');

($ret, $out, $err) = $standby->psql('postgres', qq{
BEGIN;
DECLARE c CURSOR FOR SELECT 1;
SET replica_gate.require_lsn = '$lsn';});
like($err, qr/SET replica_gate.require_lsn must be the first statement of its transaction/,
	'the SET form refuses to wait while an open cursor keeps a snapshot');

$primary->stop;
$standby->stop;
unlike(slurp_file($standby->logfile), qr/FATAL: .*replica_gate replay watcher/,
	'the replay watcher leaves an orderly shutdown without a FATAL line');
done_testing();
