# Gates under ordinary write load never hold replay back.  The primary
# updates a small table (HOT pruning), VACUUMs it, and bulk-inserts rows that
# it then reads (on 19 such reads log page-visibility changes, which conflict
# with standby snapshots too).  On the standby, with an apply delay,
# hot_standby_feedback off and max_standby_streaming_delay = -1 (replay waits
# for a conflicting snapshot as long as it lives), sessions gate every read:
# some with the gate as a statement of its own (it waits without an xmin and
# must always pass), some with the gate sharing its statement or its
# transaction with a read (it keeps its snapshot and gives way when replay
# waits), some in the session mode (replica_gate.consistency = strong: each
# read gives its snapshot back, asks the primary and waits).  No recovery-conflict wait may last 50 ms (read from the log,
# log_recovery_conflict_waits, 14+; on 13 the startup process's wait event,
# sampled every 5 ms or so).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use List::Util qw(max sum);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\n",
	standby_conf => "hot_standby_feedback = off\nmax_standby_streaming_delay = -1\n"
	  . "recovery_min_apply_delay = '50ms'\n");
my $logged = rg_major($standby) >= 14;
if ($logged)
{
	$standby->append_conf('postgresql.conf',
		"log_recovery_conflict_waits = on\ndeadlock_timeout = '10ms'\n");
	$standby->reload;
}

$primary->safe_psql('postgres', q{
	CREATE TABLE u (id int PRIMARY KEY, v int) WITH (fillfactor = 50);
	INSERT INTO u SELECT i, 0 FROM generate_series(1, 100) i;
	CREATE TABLE b (x int);});
$primary->wait_for_catchup($standby->name, 'replay');
my $offset = -s $standby->logfile;

# The write load, about 10 s of it.
my $updates = rg_bg_start($primary, q{DO $$ BEGIN
	FOR i IN 1..4000 LOOP
		UPDATE u SET v = v + 1 WHERE id = 1 + i % 100;
		COMMIT;
		IF i % 20 = 0 THEN PERFORM pg_sleep(0.05); END IF;
	END LOOP; END $$}, 'updates');
my $vacuums = rg_bg_start($primary,
	[ map { ('VACUUM u', 'SELECT pg_sleep(0.2)') } 1 .. 40 ], 'vacuums');
my $bulk = rg_bg_start($primary,
	[ map { ('INSERT INTO b SELECT generate_series(1, 20000)', 'SELECT count(*) FROM b',
			 'DELETE FROM b WHERE x % 2 = 0', 'SELECT pg_sleep(0.3)') } 1 .. 20 ],
	'bulk');

# Readers: each gates 80 reads on what the standby has received (so that
# it waits about the apply delay), taken first with \gset: a gate's target
# must be a constant or a parameter for it to wait without its xmin.  psql
# sends each statement of a script file on its own.
my %forms = (
	alone => "SELECT replica_gate.require_lsn(:'t', 5000);\nSELECT v FROM u WHERE id = %d;",
	shared => "SELECT v, replica_gate.wait_for_lsn(:'t', 5000) FROM u WHERE id = %d;",
	in_xact => "BEGIN;\nSELECT v FROM u WHERE id = %d;\nSELECT replica_gate.require_lsn(:'t', 5000);\nCOMMIT;",
	strong => "SELECT v FROM u WHERE id = %d;",
);
my %prefix = (strong => "SET replica_gate.consistency = strong;\nSET replica_gate.default_timeout = 5000;\n");
my %readers;
for my $form (sort keys %forms)
{
	my $script = $standby->basedir . "/$form.sql";
	PostgreSQL::Test::Utils::append_to_file($script,
		($prefix{$form} // '') . join('', map { "SELECT pg_last_wal_receive_lsn() AS t \\gset\n"
				  . sprintf($forms{$form}, $_) . "\n" } 1 .. 80));
	for my $n (1 .. 3)
	{
		$readers{"$form$n"} = rg_bg_start($standby, "\\i $script", "$form$n");
	}
}

my $readers = q{SELECT count(*) FROM pg_stat_activity
	WHERE application_name ~ '^(alone|shared|in_xact|strong)[0-9]$'};
my $sampler;
if (!$logged)
{
	# 13: sample until the readers are gone and replay has caught up
	$standby->poll_query_until('postgres', "SELECT ($readers) > 0");
	$sampler = rg_conflict_sampler($standby, "($readers) = 0");
}
rg_bg_finish($_) for values %readers;
rg_bg_finish($_) for ($updates, $vacuums, $bulk);
is($updates->{rc}, 0, 'the write load ran') or diag($updates->{stderr});

my %failed;
for my $name (sort keys %readers)
{
	(my $form = $name) =~ s/\d+$//;
	my @errors = $readers{$name}{stderr} =~ /ERROR:/g;
	my $false = () = $readers{$name}{stdout} =~ /\|f$/mg;
	$failed{$form} += @errors + $false;
}
is($failed{alone}, 0, 'every gate that is a statement of its own passed (240 of 240)')
  or diag(join "\n", map { $readers{"alone$_"}{stderr} } 1 .. 3);
note("gates that gave way or timed out: shared $failed{shared} of 240, in_xact $failed{in_xact} of 240, "
	  . "strong $failed{strong} of 240");
cmp_ok($failed{strong}, '<=', 5,
	"strong reads pass under the write load: at most 5 of 240 refused ($failed{strong})");

$primary->wait_for_catchup($standby->name, 'replay');
if ($logged)
{
	my @holds = rg_replay_holds($standby, $offset);
	my $longest = max(0, @holds);
	cmp_ok($longest, '<', 50,
		'replay never waited 50 ms on a conflict (' . scalar(@holds)
		  . " waits over 10 ms, longest $longest ms)");
}
else
{
	# 13: sampled every 5 ms or so; a wait seen for 40 ms may have lasted 50
	my ($longest, $samples) = rg_conflict_longest($sampler);
	cmp_ok($samples, '>', 200, "the startup process sampled $samples times");
	cmp_ok($longest, '<', 40,
		"replay never seen waiting 40 ms on a conflict (longest $longest ms)");
}
is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'), '0',
	'no gate left waiting');

$primary->stop;
$standby->stop;
done_testing();
