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
	"SELECT replica_gate.wait_for_lsn('$lsn', 60000)", 'reached');
my $beyond = rg_bg_start($standby,
	"SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 60000)", 'beyond');
rg_pid_of($standby, 'reached');
rg_pid_of($standby, 'beyond');

# Promotion ends the pause, replays what was received, then ends recovery.
$primary->stop;
$standby->promote;

rg_bg_finish($reached);
is($reached->{stdout}, 't', 'target replayed before promotion: true');
rg_bg_finish($beyond);
like($beyond->{stderr}, qr/ERROR:  55000: recovery is not in progress/,
	'target never replayed: recovery is not in progress');
like($beyond->{stderr},
	qr/DETAIL:  Recovery ended before target LSN FFFFFFFF\/FFFFFFFF was replayed; the last replayed LSN is [0-9A-F]+\/[0-9A-F]+\./,
	'the detail names the target and the last replayed LSN');
cmp_ok($beyond->{elapsed}, '<', 30, 'the wait ended with the promotion');

is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'0', 'no waiter left registered');
is($standby->safe_psql('postgres', "SELECT replica_gate.caught_up('$lsn')"),
	't', 'as a primary, an old token is caught up');
my ($ret, $out, $err) = $standby->psql('postgres',
	"SELECT replica_gate.caught_up('FFFFFFFF/FFFFFFFF')");
like($err, qr/target LSN FFFFFFFF\/FFFFFFFF is beyond the WAL insert position/,
	'as a primary, a target beyond its WAL is an error');

$standby->stop;
done_testing();
