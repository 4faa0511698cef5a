# A wait that holds a snapshot can block the replay it waits for: with
# hot_standby_feedback off and max_standby_streaming_delay = -1, replay of a
# VACUUM cleanup record waits for the waiter's snapshot to go away, while the
# waiter waits for replay.  The function form holds its statement's snapshot
# and can only time out; the SET form holds none and succeeds.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\n",
	standby_conf =>
	  "hot_standby_feedback = off\nmax_standby_streaming_delay = -1\n");

$primary->safe_psql('postgres',
	'CREATE TABLE d (id int); INSERT INTO d SELECT generate_series(1, 1000)');
$primary->wait_for_catchup($standby->name, 'replay');

# Dead tuples removed by VACUUM on the primary while the standby is paused
# before the DELETE: a snapshot taken now conflicts with the cleanup record.
sub prepare_conflict
{
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
	# 14+ tells when the pause took effect; 13 only that it was requested.
	if (rg_major($standby) >= 14)
	{
		$standby->poll_query_until('postgres',
			"SELECT pg_get_wal_replay_pause_state() = 'paused'")
		  or die 'replay did not pause';
	}
	$primary->safe_psql('postgres', 'DELETE FROM d');
	$primary->safe_psql('postgres', 'VACUUM d');
	my $lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	$primary->wait_for_catchup($standby->name, 'write');
	$primary->safe_psql('postgres', 'INSERT INTO d SELECT generate_series(1, 1000)');
	return $lsn;
}

# --- function form: self-deadlock, ends only by its timeout ----------------
my $lsn = prepare_conflict();
my $w = rg_bg_start($standby,
	"SELECT replica_gate.wait_for_lsn('$lsn', 3000)", 'fn_waiter');
rg_pid_of($standby, 'fn_waiter');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
ok( $standby->poll_query_until('postgres',
		"SELECT wait_event = 'RecoveryConflictSnapshot' FROM pg_stat_activity WHERE backend_type = 'startup'"),
	'replay blocks on the function-form waiter\'s snapshot');
rg_bg_finish($w);
is($w->{stdout}, 'f', 'the function-form wait can only time out');
$primary->wait_for_catchup($standby->name, 'replay');

# --- SET form: no snapshot, replay goes on, the gate passes -----------------
$lsn = prepare_conflict();
$w = rg_bg_start($standby,
	"SET replica_gate.default_timeout = 30000; SET replica_gate.require_lsn = '$lsn'; SELECT pg_last_wal_replay_lsn() >= '$lsn'",
	'set_waiter');
rg_pid_of($standby, 'set_waiter');
is( $standby->safe_psql('postgres',
		"SELECT backend_xmin IS NULL FROM pg_stat_activity WHERE application_name = 'set_waiter'"),
	't', 'the SET-form waiter holds no snapshot while it waits');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($w);
is($w->{rc}, 0, 'the SET-form gate succeeded') or diag($w->{stderr});
is($w->{stdout}, 't', 'after replay passed the cleanup record');

# The same as the first statement of a REPEATABLE READ transaction, which
# then sees the state at the token: the DELETE replayed, and the row written
# last.  (Before the gate the standby shows the 1000 rows of before the
# DELETE and not that row.)
$lsn = prepare_conflict();
my $after = $primary->safe_psql('postgres',
	'INSERT INTO d VALUES (-1); SELECT replica_gate.last_commit_token()');
is($standby->safe_psql('postgres', 'SELECT count(*), count(*) FILTER (WHERE id = -1) FROM d'),
	'1000|0', 'before the gate the paused standby shows the old rows');
$w = rg_bg_start($standby, qq{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL replica_gate.default_timeout = 30000;
SET LOCAL replica_gate.require_lsn = '$after';
SELECT count(*), count(*) FILTER (WHERE id = -1) FROM d;
COMMIT;}, 'rr_waiter');
rg_pid_of($standby, 'rr_waiter');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($w);
is($w->{stdout}, '1001|1', 'REPEATABLE READ after a SET LOCAL gate sees the state at the token')
  or diag($w->{stderr});

$primary->stop;
$standby->stop;
done_testing();
