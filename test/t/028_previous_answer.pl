# A strong read served without a question takes as its target the answer
# before the newest while that answer's own window still covers the read
# (its position is older, so replay has nearly always passed it), else the
# newest (proof.c).  Here the previous answer has outlived its window when
# the newest arrives, and a write was acknowledged in between: the read
# must take the newest.
#
# Each attempt (until 3 count, of at most 20): the standby holds a lease
# (W = 400 ms); its question worker is stopped (SIGSTOP) until that lease
# has expired on the primary; a commit is then acknowledged at once (no
# lease is live); the worker is woken and asks, and its answer grants a new
# lease; a strong read right after it is served locally (counted), and must
# see the commit.  The standby applies 300 ms late, so a read whose target
# is the previous answer's position returns the value from before the
# commit while the apply delay lasts (a build that takes the previous answer
# without its window did in 1 or 2 of 3 counted attempts on 15); the newest
# answer's position makes it wait for the commit.  The reads run in one
# session: a statement keeps the snapshot it was started with only if the
# replay position noted by a gate of an earlier transaction covers its
# target (session.c), and the last such gate here ran before the commit (a
# build that keeps the snapshot without comparing returned the old value in
# 2 or 3 of 3 counted reads).  The new answer may grant no lease (the
# primary asks a standby to show that it keeps up at questions W / 2 to
# 3 W / 2 apart): such an attempt asks the primary, and does not count.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval);

my $W = 400;
my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\nreplica_gate.commit_wait = '${W}ms'\n",
	standby_conf => "recovery_min_apply_delay = '300ms'\n");
rg_strong_counter($primary, '2s');
$primary->wait_for_catchup($standby->name, 'replay');

my $reader = rg_session($standby, 'reader');
rg_session_query($reader, '\\set VERBOSITY verbose');
my $strong_read = sub {
	return rg_session_query($reader, 'SELECT v FROM counter;');
};
my $local_reads = sub {
	return $standby->safe_psql('postgres', 'SELECT strong_reads_local FROM replica_gate.stats');
};
# One session on the primary watches the lease and commits, polling in the
# server: the worker's first question after its stop must come within
# 3 W / 2 of its last one before it, or the primary asks the standby to show
# again that it keeps up, and the new answer has no lease (starting a psql
# for each look took longer than that on a loaded machine).
my $ps = rg_session($primary);
my $lease = 'SELECT coalesce(max(expires_in_ms), -1e9) FROM replica_gate.leases()';

my $start = [gettimeofday];
$strong_read->() while $local_reads->() < 5 && tv_interval($start) < 30;
cmp_ok($local_reads->(), '>=', 5, 'strong reads are served without a question');

my $pm = $standby->{_pid};
my ($worker) = split /\s+/, `pgrep -P $pm -f 'replica_gate question'`;
($worker // '') =~ /^\d+$/ or die 'no question worker';
pass("the question worker runs ($worker)");
# (a test that dies while it is stopped must not leave it so)
END { kill 'CONT', $worker if $worker }

my ($counted, $wrong, $value) = (0, 0, 0);
for my $attempt (1 .. 20)
{
	last if $counted >= 3;
	# a fresh lease, then no answer until it has expired
	$start = [gettimeofday];
	$strong_read->() until rg_session_query($ps, "$lease;") > $W / 2 || tv_interval($start) > 10;
	kill 'STOP', $worker;
	rg_session_until($ps, "($lease) < 0", 10, 'UPDATE counter SET v = v + 1;')
	  or die 'the lease never expired';
	$value++;
	# the worker asks at once (its old latch timeout ran while it was stopped)
	kill 'CONT', $worker;
	kill 'USR1', $worker;
	rg_session_until($ps, "($lease) > $W / 2", 2);
	my $before = $local_reads->();
	my $read = $strong_read->();
	next if $local_reads->() == $before;    # it asked: not the case tested
	$counted++;
	$wrong++ if $read =~ /^[0-9]+$/ && $read < $value;
	note("attempt $attempt: served locally, read $read, committed $value");
}
cmp_ok($counted, '>=', 3, "reads served with a new answer right after an expired one ($counted)");
is($wrong, 0, 'none of them returned the value from before the commit');
$_->{in} .= "\\q\n" foreach ($reader, $ps);
$_->{run}->finish foreach ($reader, $ps);
done_testing();
