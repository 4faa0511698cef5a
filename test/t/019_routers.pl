# Strong reads and the token floor behind routers, with no application
# change but a role setting or a SET: pgbouncer in transaction pooling mode,
# and pgpool-II in streaming-replication mode with load balancing (reads to
# the standby, SETs to both nodes).  Each router: a strong read (the role's
# replica_gate.consistency) and a read under replica_gate.read_after, made
# while replay is paused, see the write once it resumes; plain reads through
# the same router are stale (the reads did go to the standby); a history
# checker through the router finds no stale strong read.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(sleep);

my $pgbouncer = '/usr/sbin/pgbouncer';
my $pgpool = '/usr/sbin/pgpool';
plan skip_all => 'pgbouncer or pgpool is not installed'
  unless -x $pgbouncer && -x $pgpool;

# Debian 12's pgbouncer and pgpool speak protocol 3.0 only, and libpq 19
# asks for a newer one by default (older libpq ignores the variable).
$ENV{PGMAXPROTOCOLVERSION} = '3.0';

my ($primary, $standby) = rg_primary_standby(primary_conf => "autovacuum = off\n");
my $user = `id -un`;
chomp $user;
rg_strong_counter($primary, '10s');
$primary->wait_for_catchup($standby->name, 'replay');

my $dir = PostgreSQL::Test::Utils::tempdir_short;

# --- the routers ----------------------------------------------------------------
my $bport = rg_pgbouncer($dir, ['reader'],
	primary => $primary, standby => $standby);

my $pport = PostgreSQL::Test::Cluster::get_free_port();
PostgreSQL::Test::Utils::append_to_file("$dir/pgpool.conf", qq{
backend_clustering_mode = 'streaming_replication'
listen_addresses = ''
port = $pport
socket_dir = '$dir'
pcp_listen_addresses = ''
pcp_port = @{[PostgreSQL::Test::Cluster::get_free_port()]}
pcp_socket_dir = '$dir'
backend_hostname0 = '@{[$primary->host]}'
backend_port0 = @{[$primary->port]}
backend_weight0 = 0
backend_flag0 = 'DISALLOW_TO_FAILOVER'
backend_hostname1 = '@{[$standby->host]}'
backend_port1 = @{[$standby->port]}
backend_weight1 = 1
backend_flag1 = 'DISALLOW_TO_FAILOVER'
load_balance_mode = on
sr_check_period = 0
sr_check_user = '$user'
health_check_period = 0
enable_pool_hba = off
num_init_children = 8
max_pool = 2
pid_file_name = '$dir/pgpool.pid'
logdir = '$dir'
log_destination = 'stderr'
});
PostgreSQL::Test::Utils::append_to_file("$dir/pcp.conf", '');
my $pool = IPC::Run::start(
	[ $pgpool, '-n', '-f', "$dir/pgpool.conf", '-F', "$dir/pcp.conf" ],
	'>', \my $p_out, '2>', \my $p_err);
foreach (1 .. 100)
{
	last if -S "$dir/.s.PGSQL.$bport" && -S "$dir/.s.PGSQL.$pport";
	sleep 0.1;
}

my %routers = (
	pgbouncer => { reader => "host=$dir port=$bport dbname=standby user=reader",
		plain => "host=$dir port=$bport dbname=standby",
		primary => "host=$dir port=$bport dbname=primary",
		# transaction pooling: the floor lives as long as its transaction
		floor => sub { "BEGIN; SET LOCAL replica_gate.default_timeout = '10s'; SET LOCAL replica_gate.read_after = '$_[0]'; SELECT v FROM counter; COMMIT;" },
		# pgbouncer 1.18 keeps no prepared statements across transactions
		history => [ 'simple:role', 'pipeline:role' ] },
	pgpool => { reader => "host=$dir port=$pport dbname=postgres user=reader",
		plain => "host=$dir port=$pport dbname=postgres",
		primary => "host=$dir port=$pport dbname=postgres",
		# one statement each (pgpool sends a multi-statement string to the primary)
		floor => sub { [ "SET replica_gate.default_timeout = '10s'", "SET replica_gate.read_after = '$_[0]'", 'SELECT v FROM counter' ] },
		history => [ 'simple:role', 'prepared:role' ] });

sub via
{
	my ($dsn, $sql) = @_;
	my ($o, $e) = ('', '');
	IPC::Run::run([ 'psql', '-XAtq', '-d', $dsn, '-c', $sql ], '>', \$o, '2>', \$e);
	chomp $o;
	return ($o, $e);
}

sub via_bg
{
	my ($dsn, $sql) = @_;
	my $h = { out => '', err => '' };
	$h->{run} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $dsn, map { ('-c', $_) } (ref $sql ? @$sql : $sql) ],
		'>', \$h->{out}, '2>', \$h->{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return $h;
}

my $v = 0;
for my $name (sort keys %routers)
{
	my $r = $routers{$name};
	my ($mode, $why) = via($r->{reader}, 'SHOW replica_gate.consistency');
	is($mode, 'strong', "$name: the role's setting reaches the server connection")
	  or diag($why);

	# a write while replay is paused: plain reads are stale, strong reads wait
	rg_pause_replay($standby);
	$v++;
	my ($token) = via($r->{primary},
		"BEGIN; UPDATE counter SET v = $v; COMMIT; SELECT replica_gate.last_commit_token()");
	like($token, qr/^\d+:/, "$name: the write's token");
	is((via($r->{plain}, 'SELECT v FROM counter'))[0], $v - 1,
		"$name: a plain read goes to the standby and is stale");
	my $strong = via_bg($r->{reader}, 'SELECT v FROM counter');
	my $floor = via_bg($r->{plain}, $r->{floor}->($token));
	my $waiting = 0;
	foreach (1 .. 100)
	{
		$waiting = $standby->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE @{[RG_IN_GATE]} AND backend_type = 'client backend'");
		last if $waiting == 2;
		sleep 0.1;
	}
	is($waiting, 2, "$name: the strong read and the read under the floor wait on the standby");
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
	$strong->{run}->finish;
	$floor->{run}->finish;
	is($strong->{out}, "$v\n", "$name: the strong read sees the write") or diag($strong->{err});
	is($floor->{out}, "$v\n", "$name: the read under the floor sees the write") or diag($floor->{err});

	# a history through the router
	my ($hout, $herr) = ('', '');
	IPC::Run::run([ '/usr/bin/python3', "$FindBin::RealBin/../clients/rg_history.py",
			$primary->connstr('postgres'), $r->{reader}, 4, @{ $r->{history} } ],
		'>', \$hout, '2>', \$herr,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	note($hout);
	diag($herr) if $herr;
	my @lines = ($hout =~ /"reads": (\d+), "violations": (\d+)/g);
	is(scalar(@lines), 4, "$name: both history readers reported");
	my ($reads, $violations) = (0, 0);
	while (my ($n, $bad) = splice(@lines, 0, 2)) { $reads += $n; $violations += $bad; }
	cmp_ok($reads, '>', 50, "$name: strong reads ran ($reads)");
	is($violations, 0, "$name: no strong read missed a write acknowledged before it began");
	$v = $primary->safe_psql('postgres', 'SELECT v FROM counter');
}

$pool->signal('TERM');
$pool->finish;
done_testing();
