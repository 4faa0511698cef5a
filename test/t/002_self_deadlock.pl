# No gate holds back the replay it waits for.  With hot_standby_feedback off
# and max_standby_streaming_delay = -1, replay of a VACUUM cleanup record
# waits for every snapshot that can still see the removed rows, for as long
# as it exists.  A function-form gate that is its statement's only work
# waits without its xmin, so replay goes on and the gate passes; any other
# function-form gate keeps its snapshot and gives way (false, or RG001)
# within milliseconds of replay waiting; the SET form holds no snapshot.
# How long replay waited is read from the standby's log
# (log_recovery_conflict_waits, 14+, with deadlock_timeout = 10 ms), or on 13
# sampled from the startup process's wait event every 5 ms or so: no
# conflict wait may last 50 ms.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use List::Util qw(max);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\n",
	standby_conf =>
	  "hot_standby_feedback = off\nmax_standby_streaming_delay = -1\n");
my $logged = rg_major($standby) >= 14;
if ($logged)
{
	$standby->append_conf('postgresql.conf',
		"log_recovery_conflict_waits = on\ndeadlock_timeout = '10ms'\n");
	$standby->reload;
}

$primary->safe_psql('postgres',
	'CREATE TABLE d (id int); INSERT INTO d SELECT generate_series(1, 1000)');
$primary->wait_for_catchup($standby->name, 'replay');

# prepare_conflict($round)
#	Pause replay, then on the primary delete the rows, insert the marker
#	-$round and VACUUM: a snapshot taken on the standby now conflicts with
#	the cleanup record.  Returns the LSN after the VACUUM; rows 1 to 1000
#	come back after it.
sub prepare_conflict
{
	my ($round) = @_;
	rg_pause_replay($standby);
	$primary->safe_psql('postgres', "DELETE FROM d; INSERT INTO d VALUES (-$round)");
	$primary->safe_psql('postgres', 'VACUUM d');
	# the insert position: VACUUM writes no commit record, so its WAL
	# need not be written out yet
	my $lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	$primary->wait_for_catchup($standby->name, 'write');
	$primary->safe_psql('postgres', 'INSERT INTO d SELECT generate_series(1, 1000)');
	return $lsn;
}

# replay_not_held($w, $what)
#	No recovery conflict after the start of session $w lasted 50 ms: read
#	from the log (14+), or seen by the sampler started with it (13: sampled
#	every 5 ms or so, so a wait seen for 40 ms may have lasted 50).
#	The log is read once replay has caught up with the primary.  A gate that
#	gives way ends its session at once, but the startup process logs the end
#	of its wait only when it looks again, after as long as it has waited so
#	far (1, 3, 7, 15, 31 ms...): read right away, a wait logged as going on
#	after 15 ms may not be logged as ended yet, though it ended by 31 ms.
#	Replay past the cleanup record has logged the end of every wait on it,
#	with how long it really lasted; a gate that held replay until its
#	session ended shows as that long a wait.
sub replay_not_held
{
	my ($w, $what) = @_;
	if ($logged)
	{
		$primary->wait_for_catchup($standby->name, 'replay');
		my $longest = max(0, rg_replay_holds($standby, $w->{offset}));
		cmp_ok($longest, '<', 50,
			"$what: replay never waited 50 ms (longest logged wait: $longest ms)");
		return;
	}
	my ($longest, $samples) = rg_conflict_longest($w->{sampler});
	ok($samples > 0 && $longest < 40,
		"$what: replay never seen waiting 40 ms ($samples samples, longest $longest ms)");
}

# gave_way()
sub gave_way
{
	return $standby->safe_psql('postgres', 'SELECT gave_way FROM replica_gate.stats');
}

# run_gate($round, $sql, $name)
#	Start $sql on the paused standby, wait until it sleeps in its gate,
#	resume replay, and return the finished session with the log offset
#	from before it started (13: with a conflict sampler started before the
#	resume).
sub run_gate
{
	my ($sql, $name) = @_;
	my $offset = -s $standby->logfile;
	my $w = rg_bg_start($standby, $sql, $name);
	rg_pid_of($standby, $name);
	my $xmin = $standby->safe_psql('postgres',
		"SELECT backend_xmin IS NULL FROM pg_stat_activity WHERE application_name = '$name'");
	$w->{sampler} = rg_conflict_sampler($standby,
		"NOT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = '$name')")
	  unless $logged;
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
	rg_bg_finish($w);
	$w->{offset} = $offset;
	$w->{no_xmin} = $xmin;
	return $w;
}

my $round = 0;

# --- the gate alone: waits without an xmin, replay goes on, it passes -------
my $lsn = prepare_conflict(++$round);
my $w = run_gate("SELECT replica_gate.wait_for_lsn('$lsn', 20000)", 'alone');
is($w->{no_xmin}, 't', 'a gate that is its statement\'s only work waits without an xmin');
is($w->{stdout}, 't', 'it passes once replay went past the cleanup record')
  or diag($w->{stderr});
cmp_ok($w->{elapsed}, '<', 10, "well before its 20 s timeout ($w->{elapsed} s)");
replay_not_held($w, 'gate alone');

# The same, followed by the read in one query string (one implicit
# transaction): the read takes its own snapshot and sees the write.
$lsn = prepare_conflict(++$round);
$w = run_gate(
	"SELECT replica_gate.require_lsn('$lsn', 20000); SELECT count(*) FILTER (WHERE id = -$round) FROM d",
	'with_read');
is($w->{no_xmin}, 't', 'the gate before a read in one query string waits without an xmin');
like($w->{stdout}, qr/^1$/m, 'the read after it sees the write') or diag($w->{stderr});
replay_not_held($w, 'gate then read in one query string');

# Behind a token of the write, from a plain LSN given as text.
$lsn = prepare_conflict(++$round);
$w = run_gate("SELECT replica_gate.require_lsn('$lsn'::text, 20000)", 'text_form');
is($w->{rc}, 0, 'require_lsn(text) alone passes') or diag($w->{stderr});
replay_not_held($w, 'require_lsn(text) alone');

# A prepared gate, run by EXECUTE in a later transaction.
$lsn = prepare_conflict(++$round);
$w = run_gate(
	[ 'PREPARE g(text) AS SELECT replica_gate.require_lsn($1, 20000)', "EXECUTE g('$lsn')" ],
	'prepared');
is($w->{no_xmin}, 't', 'a prepared gate run by EXECUTE waits without an xmin');
is($w->{rc}, 0, 'and passes') or diag($w->{stderr});
replay_not_held($w, 'EXECUTE of a prepared gate');

# --- a gate that is not alone keeps its snapshot and gives way ---------------
my $before = gave_way();
$lsn = prepare_conflict(++$round);
$w = run_gate("SELECT replica_gate.wait_for_lsn('$lsn', 20000), 1", 'not_alone');
is($w->{no_xmin}, 'f', 'a gate with other work in its statement keeps its snapshot');
is($w->{stdout}, 'f|1', 'it gives way: false, as if timed out') or diag($w->{stderr});
cmp_ok($w->{elapsed}, '<', 10, "long before its 20 s timeout ($w->{elapsed} s)");
replay_not_held($w, 'gate with another column');
is(gave_way(), $before + 1, 'stats count the gate that gave way');
$primary->wait_for_catchup($standby->name, 'replay');

# After a read in the same transaction: RG001, replay goes on.
$lsn = prepare_conflict(++$round);
$w = run_gate(
	"BEGIN; SELECT count(*) FROM d; SELECT replica_gate.require_lsn('$lsn', 20000); COMMIT",
	'after_read');
like($w->{stderr}, qr/RG001: gate on target \Q$lsn\E gave way to replay/,
	'require_lsn after a read in its transaction gives way with RG001');
replay_not_held($w, 'gate after a read in its transaction');
$primary->wait_for_catchup($standby->name, 'replay');

# Inside a function: the caller's snapshot stays; it gives way too.
$lsn = prepare_conflict(++$round);
$w = run_gate(
	"DO \$\$ BEGIN PERFORM replica_gate.require_lsn('$lsn', 20000); END \$\$",
	'in_do');
like($w->{stderr}, qr/RG001: gate on target \S+ gave way to replay/, 'a gate inside a DO block gives way');
replay_not_held($w, 'gate inside a DO block');
$primary->wait_for_catchup($standby->name, 'replay');

# require_fresh in a statement with other work: gives way or passes, never holds.
$lsn = prepare_conflict(++$round);
$w = run_gate("SELECT replica_gate.require_fresh('1 ms', 20000), 1", 'fresh_not_alone');
cmp_ok($w->{elapsed}, '<', 10, "require_fresh with other work ends early ($w->{elapsed} s)");
replay_not_held($w, 'require_fresh with another column');
$primary->wait_for_catchup($standby->name, 'replay');

# --- SET form: no snapshot, replay goes on, the gate passes -----------------
$lsn = prepare_conflict(++$round);
$w = run_gate(
	"SET replica_gate.default_timeout = 30000; SET replica_gate.require_lsn = '$lsn'; SELECT pg_last_wal_replay_lsn() >= '$lsn'",
	'set_waiter');
is($w->{no_xmin}, 't', 'the SET-form waiter holds no snapshot while it waits');
is($w->{rc}, 0, 'the SET-form gate succeeded') or diag($w->{stderr});
is($w->{stdout}, 't', 'after replay passed the cleanup record');
replay_not_held($w, 'SET form');

# --- a statement of the token floor, listed while it was planned -----------
# Replaying a cleanup record, the startup process lists the backends whose
# xmin conflicts with it and waits for each one's transaction to end, not
# for its xmin to go.  A statement gated by the session mode or the floor
# holds a snapshot while it is parsed and planned, and gives it back only to
# wait: listed before that, it waited for replay that waited for it, and
# gave way (RG001) after 20 ms; under catalog churn on the primary that was
# a large share of statements (bench/replan_churn).  Here its planning
# sleeps (an immutable function evaluated by the planner) while replay
# resumes and lists it.  It must pass, once replay went past the record.
$primary->safe_psql('postgres', q{
CREATE FUNCTION slow_id(int) RETURNS int IMMUTABLE LANGUAGE plpgsql
AS $$ BEGIN PERFORM pg_sleep(1); RETURN $1; END $$});
$lsn = prepare_conflict(++$round);
{
	my $name = 'listed_floor';
	my $w = rg_bg_start($standby,
		[ "SET replica_gate.default_timeout = 30000; SET replica_gate.read_after = '$lsn'",
		  "SELECT count(*) FILTER (WHERE id = -$round) FROM d WHERE id > slow_id(-100000)" ],
		$name);
	$standby->poll_query_until('postgres',
		"SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE application_name = '$name'")
	  or die 'the statement never planned';
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
	rg_bg_finish($w);
	is($w->{stdout}, '1',
		'a floor-gated statement listed by replay while it was planned passes, and sees the write')
	  or diag($w->{stderr});
}
$primary->wait_for_catchup($standby->name, 'replay');

# The same as the first statement of a REPEATABLE READ transaction, which
# then sees the state at the token: the DELETE replayed, and the row written
# last.  (Before the gate the standby shows the 1000 rows of before the
# DELETE and not that row.)
$lsn = prepare_conflict(++$round);
my $after = $primary->safe_psql('postgres',
	'INSERT INTO d VALUES (-1000); SELECT replica_gate.last_commit_token()');
is($standby->safe_psql('postgres', 'SELECT count(*) FILTER (WHERE id > 0), count(*) FILTER (WHERE id = -1000) FROM d'),
	'1000|0', 'before the gate the paused standby shows the old rows');
$w = run_gate(qq{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL replica_gate.default_timeout = 30000;
SET LOCAL replica_gate.require_lsn = '$after';
SELECT count(*) FILTER (WHERE id = -$round), count(*) FILTER (WHERE id = -1000) FROM d;
COMMIT;}, 'rr_waiter');
is($w->{stdout}, '1|1', 'REPEATABLE READ after a SET LOCAL gate sees the state at the token')
  or diag($w->{stderr});

$primary->stop;
$standby->stop;
done_testing();
