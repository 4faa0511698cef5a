# A standby's clock that stops between two answers of the primary makes the
# older of them look younger than it is; a strong read served without a
# question may take that older answer as its target (028), so the stop must
# be seen when the newer arrives.  What the standby sees of it is the
# primary's commit clock advancing between the two answers more than its
# own clock could have counted (proof.c): the clock check then fails at
# once, however close the answers are, and no read is served without a
# question until the clocks have been checked again.
#
# The standby asks the primary through a proxy (test/clients/rg_proxy.py)
# that adds a jump to the primary's clock in every answer from a given
# moment on, as a stop of the standby's own clock would look to it.  With
# W = 300 ms the question worker asks every 150 ms and makes a verdict over
# at least 200 ms.  Each attempt waits until strong reads are served
# locally (a verdict has just held), holds the primary's replies (and
# waits until the worker's count of questions stays put: any answer passed
# on before is taken in), sets the jump and lets them go, so that the next answer, about 150 ms after that
# verdict, carries it; once the worker has taken that answer in
# (stats.questions), five strong reads must all ask the primary.  A build
# whose clock check waits for its full span serves them without a question
# whenever the jumped answer came within 0.2 s of the verdict: every other
# attempt here (20 of 40 reads on 15).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

my $W = 300;
my ($primary, $direct) = rg_primary_standby(
	primary_conf => "autovacuum = off\nreplica_gate.commit_wait = '${W}ms'\n");
rg_strong_counter($primary, '2s');
$direct->stop;

my $proxy_dir = PostgreSQL::Test::Utils::tempdir_short;
my $jump_file = "$proxy_dir/jump";
my $proxy_out = '';
my $proxy = IPC::Run::start(
	[ '/usr/bin/python3', "$FindBin::RealBin/../clients/rg_proxy.py",
	  "$proxy_dir/.s.PGSQL.5432", $primary->host . '/.s.PGSQL.' . $primary->port,
	  "$proxy_dir/hold", 1, $jump_file ],
	'>', \$proxy_out, '2>', \my $proxy_err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$proxy->pump until $proxy_out =~ /listening/;

my $standby = PostgreSQL::Test::Cluster->new('jumped');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"replica_gate.primary_conninfo = 'host=$proxy_dir port=5432'\n");
$standby->start;
$primary->wait_for_catchup($standby->name, 'replay');

# Two open sessions, so that reads follow the jumped answer within a few ms:
# a strong reader and one that reads the count of reads served locally.
my $reader = rg_session($standby, 'reader');
my $stats = rg_session($standby);
my $local_reads = sub {
	return rg_session_query($stats, 'SELECT strong_reads_local FROM replica_gate.stats;');
};
my $questions = sub {
	return rg_session_query($stats, 'SELECT questions FROM replica_gate.stats;');
};
# Strong reads until one is served without a question (its clock check
# has just held: the worker asks next about W / 2 later).
my $served_locally = sub {
	my $before = $local_reads->();
	my $start = [gettimeofday];
	rg_session_query($reader, 'SELECT v FROM counter;')
	  while $local_reads->() == $before && tv_interval($start) < 30;
	return $local_reads->() > $before;
};

ok($served_locally->(), 'strong reads are served without a question');

my ($jump, $served) = (0, 0);
for my $attempt (1 .. 8)
{
	$served_locally->() or die 'strong reads are no longer served locally';
	# The next answer carries the jump: the primary's replies held, an
	# answer passed on before taken in, the jump set, the replies let go.
	PostgreSQL::Test::Utils::append_to_file("$proxy_dir/hold", '');
	my $asked = -1;
	while ($asked != (my $now = $questions->()))
	{
		$asked = $now;
		usleep(30_000);
	}
	$jump += 100_000;
	PostgreSQL::Test::Utils::append_to_file("$jump_file.new", "$jump\n");
	rename "$jump_file.new", $jump_file or die "could not rename: $!";
	unlink "$proxy_dir/hold";
	$proxy->pump until $proxy_out =~ /jumped $jump\n/;
	# (the worker counts a question once it has taken its answer in)
	my $start = [gettimeofday];
	usleep(1_000) while $questions->() == $asked && tv_interval($start) < 10;
	die 'the worker never took the jumped answer in' if $questions->() == $asked;
	my $before = $local_reads->();
	rg_session_query($reader, 'SELECT v FROM counter;') for 1 .. 5;
	my $now = $local_reads->() - $before;
	note("attempt $attempt: $now of 5 reads served locally after a jump of $jump us");
	$served += $now;
}
is($served, 0, 'no strong read is served without a question right after the primary\'s clock jumped');
ok($served_locally->(), 'after the clocks are checked again, strong reads are served locally');
$proxy->kill_kill;
done_testing();
