# The rule that lets strong reads share questions: an answer to a question
# already in flight when a read arrived never serves that read, since it can
# miss a commit acknowledged after the question was sent.  The question
# worker reaches the primary through a proxy that holds replies: reader A's
# question is answered by the primary and held; a write is acknowledged; then
# reader B arrives; then the reply is released.  B must see the write (a
# build in which B takes A's answer reads stale here: replay has passed that
# answer, and the write's commit is held back by recovery_min_apply_delay).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\n",
	standby_conf => "recovery_min_apply_delay = '3s'\n");
$primary->safe_psql('postgres', 'CREATE TABLE counter (v int); INSERT INTO counter VALUES (0)');

my $dir = PostgreSQL::Test::Utils::tempdir_short;
my $hold = "$dir/hold";
my $proxy_out = '';
my $proxy = IPC::Run::start(
	[ '/usr/bin/python3', "$FindBin::RealBin/../clients/rg_proxy.py",
	  "$dir/.s.PGSQL.5432", $primary->host . '/.s.PGSQL.' . $primary->port, $hold ],
	'>', \$proxy_out, '2>', \my $proxy_err);
$proxy->pump until $proxy_out =~ /listening/;
$standby->append_conf('postgresql.conf', "replica_gate.primary_conninfo = 'host=$dir port=5432'\n");
$standby->reload;

# The question connection is open, and everything written so far is
# replayed (older than the apply delay).
ok($standby->poll_query_until('postgres', "SELECT replica_gate.wait_for_lsn('primary', 1000)"),
	'strong reads pass through the proxy');
sleep 4;
$primary->wait_for_catchup($standby->name, 'replay');

my $reader = sub {
	my ($name) = @_;
	return rg_bg_start($standby,
		[ "SET replica_gate.consistency = strong; SET replica_gate.default_timeout = '20s'",
		  'SELECT v FROM counter' ], $name);
};
$standby->safe_psql('postgres', 'SELECT replica_gate.stats_reset()');
PostgreSQL::Test::Utils::append_to_file($hold, '');
my $t0 = $primary->safe_psql('postgres', 'SELECT clock_timestamp()');
my $a = $reader->('reader_a');
# the primary answered A's question (its backend is idle again since)
ok( $primary->poll_query_until('postgres',
		"SELECT state = 'idle' AND state_change > '$t0' FROM pg_stat_activity
		 WHERE application_name = 'replica_gate question'"),
	"the primary answered A's question; the proxy holds the reply");
$primary->safe_psql('postgres', 'UPDATE counter SET v = 1');
my $b = $reader->('reader_b');
rg_pid_of($standby, 'reader_b');
unlink $hold;
rg_bg_finish($a);
rg_bg_finish($b);
like($a->{stdout}, qr/^[01]$/, 'A, which began before the write, read') or diag($a->{stderr});
is($b->{stdout}, '1', 'B, which began after the write was acknowledged, sees it') or diag($b->{stderr});
cmp_ok($standby->safe_psql('postgres', 'SELECT questions FROM replica_gate.stats'), '>=', 2,
	'B did not ride on the question in flight when it arrived');

$proxy->kill_kill;
done_testing();
