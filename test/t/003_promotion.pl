# Promotion during a wait: a target replayed before recovery ended counts,
# one that was not is an error; WAL the server did not replay never counts.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $standby) = rg_primary_standby();
$primary->safe_psql('postgres', 'CREATE TABLE t (v int)');
$primary->wait_for_catchup($standby->name, 'replay');

# A commit the standby has received but not replayed.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
my $lsn = $primary->safe_psql('postgres',
	'INSERT INTO t VALUES (1); SELECT pg_current_wal_lsn()');
$primary->wait_for_catchup($standby->name, 'flush');

my $reached = rg_bg_start($standby,
	rg_woke_at("replica_gate.wait_for_lsn('$lsn', 60000)"), 'reached');
# (psql goes on with the second statement after the first one's error)
my $beyond = rg_bg_start($standby,
	[ "SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000)", rg_noted_at() ],
	'beyond');
my %pid = (reached => rg_pid_of($standby, 'reached'), beyond => rg_pid_of($standby, 'beyond'));
# Probes mark when replay passes the target and when recovery ends.
my $probe_reached = rg_probe_start($standby, $lsn, 'probe_reached');
my $probe_end = rg_probe_start($standby, 'FFFFFFFF/FFFFFFFF', 'probe_end');

# Promotion ends the pause, replays what was received, then ends recovery.
# The waiters' returns are timed less the time they waited for a CPU
# (rg_wake_lag): the two probes spin meanwhile.
$primary->stop;
my %queued = map { ($_ => (rg_schedstat($pid{$_}))[1]) } keys %pid;
$standby->promote;

my $passed = rg_probe_time($probe_reached);
my $ended = rg_probe_time($probe_end);
rg_bg_finish($reached);
my ($result, $woke) = split /\n/, $reached->{stdout};
is($result, 't', 'target replayed before promotion: true');
my ($lag, $in_queue) = rg_wake_lag($woke, $passed, $queued{reached});
cmp_ok($lag, '<', RG_WAKE_BOUND_MS,
	sprintf('it returned %.1f ms after replay passed the target, besides %.1f ms waiting for a CPU',
		$lag, $in_queue));
rg_bg_finish($beyond);
like($beyond->{stderr}, qr/ERROR:  55000: recovery is not in progress/,
	'target never replayed: recovery is not in progress');
like($beyond->{stderr},
	qr/DETAIL:  Recovery ended before target FFFFFFFF\/FFFFFFFF was replayed; the last replayed LSN is [0-9A-F]+\/[0-9A-F]+\./,
	'the detail names the target and the last replayed LSN');
# On 16 to 18 the watcher learns of the end of recovery at its 100 ms
# re-check of the replay condition variable; elsewhere at once.
($lag, $in_queue) = rg_wake_lag($beyond->{stdout}, $ended, $queued{beyond});
my $bound = rg_major($standby) >= 16 && !rg_core_wait($standby) ? 300 : RG_WAKE_BOUND_MS;
cmp_ok($lag, '<', $bound,
	sprintf('the wait ended %.1f ms after recovery ended, besides %.1f ms waiting for a CPU',
		$lag, $in_queue));

is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'0', 'no waiter left registered');
is($standby->safe_psql('postgres', "SELECT replica_gate.caught_up('$lsn')"),
	't', 'as a primary, an old token is caught up');
my ($ret, $out, $err) = $standby->psql('postgres',
	"SELECT replica_gate.caught_up('FFFFFFFF/FFFFFFFF')");
like($err, qr/target FFFFFFFF\/FFFFFFFF is beyond the WAL insert position/,
	'as a primary, a target beyond its WAL is an error');

$standby->stop;
done_testing();
