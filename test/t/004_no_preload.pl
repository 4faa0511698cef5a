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
