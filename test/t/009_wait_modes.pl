# Wait modes on a real standby: 'write' and 'flush' are satisfied once the
# walreceiver has written (flushed) the WAL, while replay, and so the read,
# may still be behind; 'replay' is what makes a write visible.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(sleep);

my ($primary, $standby) = rg_primary_standby();
$primary->safe_psql('postgres',
	"CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'old')");
$primary->wait_for_catchup($standby->name, 'replay');

# Replay paused: the WAL of the next write arrives, but is not replayed.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
my $target = rg_next_lsn($primary);

# Waiters for a position no WAL has reached yet: the next WAL record to
# arrive reaches it.
my %w;
foreach my $mode (qw(write flush))
{
	$w{$mode} = rg_bg_start($standby,
		"SELECT replica_gate.wait_for_lsn('$target', 20000, '$mode'); "
		  . "SELECT v FROM t WHERE id = 1",
		"mode_$mode");
	rg_pid_of($standby, "mode_$mode");
}

my $lsn = $primary->safe_psql('postgres',
	"UPDATE t SET v = 'new' WHERE id = 1; SELECT replica_gate.last_commit_token()");
foreach my $mode (qw(write flush))
{
	rg_bg_finish($w{$mode});
	is($w{$mode}->{stdout}, "t\nold",
		"'$mode' waiter returns true once the WAL arrives; the read is still stale");
	cmp_ok($w{$mode}->{elapsed}, '<', 10, "'$mode' waiter did not wait for its timeout");
}

# A 'replay' waiter for the write's commit waits until replay resumes.
$w{replay} = rg_bg_start($standby,
	"SELECT replica_gate.wait_for_lsn('$lsn', 20000, 'replay'); SELECT v FROM t WHERE id = 1",
	'mode_replay');
rg_pid_of($standby, 'mode_replay');
sleep 0.3;
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mode_replay'"),
	'1', "the 'replay' waiter still waits while replay is paused");

# The WAL has arrived: 'write' and 'flush' pass at once, 'replay' does not.
$primary->wait_for_catchup($standby->name, 'flush');
is( $standby->safe_psql(
		'postgres', qq{
SELECT replica_gate.caught_up('$lsn', 'write'),
       replica_gate.caught_up('$lsn', 'flush'),
       replica_gate.caught_up('$lsn'),
       replica_gate.caught_up('$lsn', 'replay')}),
	't|t|f|f',
	'caught_up per mode while replay is paused');

my ($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT replica_gate.require_lsn('FFFFFFFF/FFFFFFFF', 50, 'write')");
like($err, qr/RG001: timed out after 50 ms waiting for target FFFFFFFF\/FFFFFFFF to be written/,
	'require_lsn in write mode names the mode on timeout');
like($err, qr/DETAIL:  The last written LSN is [0-9A-F]+\/[0-9A-F]+\./,
	'and the last written position');
($ret, $out, $err) = $standby->psql('postgres',
	"SELECT replica_gate.wait_for_lsn('$lsn', 0, 'applied')");
like($err, qr/unrecognized value for "mode": "applied"/, 'unknown modes are refused');

$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
rg_bg_finish($w{replay});
is($w{replay}->{stdout}, "t\nnew", "the 'replay' waiter returns after resume and sees the write");
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'),
	'0', 'no waiter left');

$standby->stop;
$primary->stop;
done_testing();
