# A standby whose clocks stop while it is frozen, as a virtual machine's do
# while its hypervisor pauses it: when it resumes, its newest answer of the
# primary looks as young as when the pause began, though a paying commit was
# acknowledged during the pause.  The standby runs under libfaketime, every
# process with the offset one file gives; the test freezes every process of
# the standby (SIGSTOP), commits on the primary (acknowledged after its
# 1 s commit wait) while a writer keeps the primary's WAL streaming, sets the
# standby's offset back by the length of the freeze (its clocks resume where
# they stopped), and resumes the standby, all but its question worker.  On
# 16 and later only (see below).
#
#   - a strong read then does not return the value from before the commit:
#     the primary sent WAL later than the standby's clock allows since the
#     answer, so the answer proves nothing, and the read asks (the question
#     worker, still frozen, does not answer: RG001); the server log says
#     why (a build that trusts its clock serves the old value here);
#   - once the worker resumes, strong reads see the commit, and after a new
#     check of the clocks they are served without a question again.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

my $faketime = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
plan skip_all => 'libfaketime is not installed' unless -f $faketime;
# Before 16 the postmaster starts background workers from a signal handler,
# which can interrupt libfaketime in its own work: such a worker then reads
# the real clocks while the backends read the faked ones.
my ($major) = `postgres -V` =~ /(\d+)/;
plan skip_all => 'libfaketime cannot fake the clocks of every process before 16'
  if $major < 16;

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\nreplica_gate.commit_wait = '1s'\n");
$primary->safe_psql('postgres', q{
CREATE TABLE t (v int);
INSERT INTO t VALUES (1);
CREATE TABLE ticks (n int);
CREATE ROLE reader LOGIN;
GRANT SELECT ON t TO reader;
ALTER ROLE reader SET replica_gate.consistency = 'strong';
ALTER ROLE reader SET replica_gate.default_timeout = '1s';
});

# The standby again, under libfaketime: one offset for all its processes.
my $offset = PostgreSQL::Test::Utils::tempdir_short() . '/offset';
PostgreSQL::Test::Utils::append_to_file($offset, "+0\n");
$standby->stop;
{
	local $ENV{LD_PRELOAD} = $faketime;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $offset;
	local $ENV{FAKETIME_NO_CACHE} = '1';
	$standby->start;
}
$primary->wait_for_catchup($standby->name, 'replay');

sub strong_read
{
	my ($ret, $out, $err) = $standby->psql('postgres', "\\set VERBOSITY verbose\nSELECT v FROM t",
		extra_params => [ '-U', 'reader' ]);
	return $out eq '' ? $err : "saw $out";
}

sub local_reads
{
	return $standby->safe_psql('postgres', 'SELECT strong_reads_local FROM replica_gate.stats');
}

# Strong reads until the clock check holds and they are served locally.
my $start = [gettimeofday];
strong_read() while local_reads() < 5 && tv_interval($start) < 30;
cmp_ok(local_reads(), '>=', 5, 'strong reads are served without a question');

# Replay paused, a strong read is served with the newest answer, and the
# standby freezes right after it, while that answer is fresh.
my $postmaster = $standby->{_pid};
my @children = split /\s+/, `pgrep -P $postmaster`;
my ($worker) = split /\s+/, `pgrep -P $postmaster -f 'replica_gate question'`;
ok($worker, "the question worker runs ($worker)");
rg_pause_replay($standby);
like(strong_read(), qr/^saw 1$/, 'the read before the pause sees the old value');
my $frozen = [gettimeofday];
kill 'STOP', $postmaster, @children;

# Meanwhile the primary commits, and a writer (commits that do not pay)
# keeps its WAL streaming to the frozen standby's socket.
my $writer = rg_bg_start($primary,
	[ 'SET replica_gate.pay_commit_wait = off',
	  map { 'INSERT INTO ticks VALUES (1); SELECT pg_sleep(0.02)' } 1 .. 60 ], 'writer');
$primary->safe_psql('postgres', 'UPDATE t SET v = 2');
usleep(200_000);
my $paused = tv_interval($frozen);
cmp_ok($paused, '>=', 1, "the commit was acknowledged while the standby was frozen ($paused s)");

# Its clocks resume where they stopped; everything but the worker runs again.
open my $fh, '>', $offset or die "could not write $offset: $!";
printf $fh "-%.6f\n", $paused;
close $fh;
kill 'CONT', $postmaster, grep { $_ != $worker } @children;
usleep(200_000);
my $read = strong_read();
unlike($read, qr/^saw 1$/, 'the strong read after the pause does not return the old value')
  or diag($read);
like($read, qr/RG001/, 'it asked the primary (whose answer the frozen worker holds back): RG001');
like(slurp_file($standby->logfile),
	qr/this standby's clock stopped or was stepped since the primary's last answer/,
	'the log says that the clock stopped');

kill 'CONT', $worker;
rg_bg_finish($writer);
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
ok($standby->poll_query_until('postgres', 'SELECT v = 2 FROM t'), 'the commit is replayed');
like(strong_read(), qr/^saw 2$/, 'with its worker back, a strong read sees the commit');
my $before = local_reads();
$start = [gettimeofday];
strong_read() while local_reads() == $before && tv_interval($start) < 30;
cmp_ok(local_reads(), '>', $before,
	'after a new check of the clocks, strong reads are served without a question again');
done_testing();
