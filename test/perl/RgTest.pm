# RgTest.pm
#	Helpers shared by replica_gate's TAP tests: a real primary with a
#	streaming standby, and SQL run in the background the way an
#	application session would run it.

package RgTest;

use strict;
use warnings;

use Exporter 'import';
use FindBin;
use IO::Socket::UNIX;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Socket qw(SOCK_STREAM);
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval);

our @EXPORT = qw(rg_primary_standby rg_bg_start rg_bg_finish rg_pid_of rg_major
  rg_core_wait rg_next_lsn rg_partition rg_archive_standby rg_probe_start
  rg_probe_time rg_queued_ns rg_token_lsn rg_woke_at rg_noted_at rg_wake_lag
  rg_median rg_watcher_runs rg_replay_holds
  rg_conflict_sampler rg_conflict_longest rg_pause_replay rg_build_client
  rg_pgbouncer rg_strong_counter RG_WAKE_BOUND_MS rg_session rg_session_query
  rg_session_until rg_schedstat RG_IN_GATE);

# rg_primary_standby(%opts)
#	Start a primary (with replica_gate created) and a hot standby streaming
#	from it.  preload => 0 leaves shared_preload_libraries empty;
#	primary_conf / standby_conf are appended to postgresql.conf.
sub rg_primary_standby
{
	my %opts = @_;
	my $preload = $opts{preload} // 1;
	my $common = "max_connections = 250\n";
	$common .= "shared_preload_libraries = 'replica_gate'\n" if $preload;

	my $primary = PostgreSQL::Test::Cluster->new($opts{name} // 'primary');
	$primary->init(allows_streaming => 1);
	$primary->append_conf('postgresql.conf',
		$common . ($opts{primary_conf} // ''));
	$primary->start;
	$primary->safe_psql('postgres', 'CREATE EXTENSION replica_gate');
	$primary->backup('base');

	my $standby = PostgreSQL::Test::Cluster->new(
		($opts{name} // 'primary') . '_standby');
	$standby->init_from_backup($primary, 'base', has_streaming => 1);
	$standby->append_conf('postgresql.conf', $opts{standby_conf} // '');
	$standby->start;
	$primary->wait_for_catchup($standby->name, 'replay');
	return ($primary, $standby);
}

# rg_bg_start($node, $sql, $appname)
#	Run $sql (one query string, one round trip; or an array of them, one
#	after the other) in its own session with psql, in the background.
#	Returns a handle for rg_bg_finish.
sub rg_bg_start
{
	my ($node, $sql, $appname) = @_;
	my $h = { stdout => '', stderr => '', start => [gettimeofday] };
	$h->{run} = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'VERBOSITY=verbose',
			'-d', $node->connstr('postgres') . " application_name=$appname",
			map { ('-c', $_) } (ref $sql ? @$sql : $sql)
		],
		'<', \undef, '>', \$h->{stdout}, '2>', \$h->{stderr},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return $h;
}

# rg_session($node, $user)
#	An open session of $user (the OS user if undef) for rg_session_query,
#	so that statements run one after the other with no connection between
#	them.
sub rg_session
{
	my ($node, $user) = @_;
	my $h = { in => '', out => '' };
	$h->{run} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') . ($user ? " user=$user" : '') ],
		'<', \$h->{in}, '>', \$h->{out}, '2>&1',
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return $h;
}

# rg_session_query($h, $sql)
#	Run $sql in the session; returns what psql printed for it, errors
#	included.
sub rg_session_query
{
	my ($h, $sql) = @_;
	$h->{out} = '';
	$h->{in} .= "$sql\n\\echo __rg_done__\n";
	$h->{run}->pump until $h->{out} =~ /__rg_done__\n\z/;
	(my $out = $h->{out}) =~ s/__rg_done__\n\z//;
	chomp $out;
	return $out;
}

# rg_session_until($h, $cond, $seconds, $then)
#	Poll the SQL condition $cond every 5 ms in the session $h, in the
#	server (no process starts between looks), for at most $seconds (20 if
#	undef); then run the statements $then, if given, sent with the poll so
#	that nothing of the test's own runs between the condition and them.
#	True once the condition holds, false if it never did.
sub rg_session_until
{
	my ($h, $cond, $seconds, $then) = @_;
	$seconds //= 20;
	my $out = rg_session_query($h, qq{DO \$\$BEGIN
  WHILE clock_timestamp() < statement_timestamp() + interval '$seconds s' LOOP
    PERFORM pg_stat_clear_snapshot();
    IF $cond THEN RAISE NOTICE 'rg_session_until: held'; RETURN; END IF;
    PERFORM pg_sleep(0.005);
  END LOOP;
END\$\$;} . ($then // ''));
	die $out if $out =~ /ERROR/;
	return $out =~ /rg_session_until: held/;
}

# rg_bg_finish($h)
#	Wait for a background session; sets rc, stdout, stderr and elapsed (s).
sub rg_bg_finish
{
	my ($h) = @_;
	$h->{run}->finish;
	$h->{rc} = $h->{run}->result(0);
	$h->{elapsed} = tv_interval($h->{start});
	chomp $h->{stdout};
	return $h;
}

# Every pgbouncer rg_pgbouncer started, killed when the script ends.
my @rg_bouncers;

END
{
	local $?;    # reaping pgbouncer must not become the script's exit status
	# (eval: one that exited by itself has nothing left to kill)
	eval { $_->kill_kill } foreach @rg_bouncers;
}

# rg_pgbouncer($dir, $users, name => $node, ...)
#	Start pgbouncer in transaction pooling mode on a socket in $dir, with a
#	database of each given name pointing at the database postgres of its
#	node, letting in each of the roles in @$users (and the OS user) as
#	itself.  Returns the port.  The daemon is killed when the test script
#	ends, however it ends (the END block above).
sub rg_pgbouncer
{
	my ($dir, $users, %dbs) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $user = `id -un`;
	chomp $user;
	my $databases = join('', map {
		"$_ = host=@{[$dbs{$_}->host]} port=@{[$dbs{$_}->port]} dbname=postgres\n"
	} sort keys %dbs);
	PostgreSQL::Test::Utils::append_to_file("$dir/pgbouncer.ini", qq{
[databases]
$databases
[pgbouncer]
listen_addr =
listen_port = $port
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 4
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
});
	PostgreSQL::Test::Utils::append_to_file("$dir/userlist.txt",
		join('', map { qq{"$_" ""\n} } $user, @$users));
	my ($out, $err);
	push @rg_bouncers, IPC::Run::start([ '/usr/sbin/pgbouncer', "$dir/pgbouncer.ini" ],
		'>', \$out, '2>', \$err);
	foreach (1 .. 100)
	{
		last if -S "$dir/.s.PGSQL.$port";
		Time::HiRes::sleep(0.1);
	}
	return $port;
}

# rg_build_client($name)
#	Compile test/clients/$name.c against the libpq of the server PG_CONFIG
#	names, with -Wall -Werror; returns the path of the program.
sub rg_build_client
{
	my ($name) = @_;
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	my ($incdir, $libdir) = (`$pg_config --includedir`, `$pg_config --libdir`);
	chomp($incdir, $libdir);
	my $bin = PostgreSQL::Test::Utils::tempdir . "/$name";
	system('cc', '-Wall', '-Werror', '-o', $bin,
		"$FindBin::RealBin/../clients/$name.c", "-I$incdir", "-L$libdir", '-lpq') == 0
	  or BAIL_OUT("cannot build the libpq client $name");
	return $bin;
}

# rg_major($node)
#	The server's major version (13, ..., 19), beta builds included.
sub rg_major
{
	my ($node) = @_;
	return int($node->safe_psql('postgres', 'SHOW server_version_num') / 10000);
}

# rg_core_wait($node)
#	Do gates wait in core's waiter registry there (19+), with no replay
#	watcher of replica_gate's own?
sub rg_core_wait
{
	return rg_major($_[0]) >= 19;
}

# rg_partition($standby)
#	Point $standby's primary_conninfo at a listener that accepts connections
#	and never answers: each walreceiver hangs in its connection attempt.
#	Returns once no walreceiver streams from the old upstream (until then
#	it could still stream what the primary writes next: the likely cause
#	of 011's waiters never waiting, once, on 14).  Close the listener (and
#	point the standby back) to heal.
sub rg_partition
{
	my ($standby) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir_short;
	my $hole = IO::Socket::UNIX->new(
		Type => SOCK_STREAM(),
		Local => "$dir/.s.PGSQL.5999",
		Listen => 16) or die "cannot listen: $!";
	$standby->append_conf('postgresql.conf', "primary_conninfo = 'host=$dir port=5999'");
	$standby->reload;
	# (one still connecting shows no row before 19; 19 shows it, not streaming)
	$standby->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_wal_receiver WHERE status = 'streaming'")
	  or die 'the walreceiver outlived the partition';
	return $hole;
}

# rg_archive_standby($primary, $name, $conf)
#	Turn on WAL archiving on $primary (a restart) and start a standby that
#	only restores from that archive, with $conf appended.
sub rg_archive_standby
{
	my ($primary, $name, $conf) = @_;
	my $archive_dir = $primary->archive_dir;
	$primary->append_conf('postgresql.conf',
		qq{archive_mode = on\narchive_command = 'cp "%p" "$archive_dir/%f"'\n});
	$primary->restart;
	$primary->backup("${name}_base");
	my $archive = PostgreSQL::Test::Cluster->new($name);
	$archive->init_from_backup($primary, "${name}_base", has_restoring => 1);
	$archive->append_conf('postgresql.conf', $conf // '');
	$archive->start;
	$archive->poll_query_until('postgres', 'SELECT pg_is_in_recovery()')
	  or die 'archive standby is not in recovery';
	return $archive;
}

# rg_next_lsn($primary, $ahead)
#	The LSN one byte (or $ahead bytes) past the primary's WAL insert
#	position: the next WAL record written passes it.
sub rg_next_lsn
{
	my ($primary, $ahead) = @_;
	my ($hi, $lo) = split m{/},
	  $primary->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	my $lsn = hex($hi) * 2**32 + hex($lo) + ($ahead // 1);
	return sprintf('%X/%X', int($lsn / 2**32), $lsn % 2**32);
}

# rg_watcher_runs($node, $seconds)
#	How many times the replay watcher of $node was scheduled to run during
#	$seconds (from /proc/PID/schedstat, Linux only): tells polling every
#	0.5 ms (about 2,000 runs a second) from polling every 10 ms or sleeping.
sub rg_watcher_runs
{
	my ($node, $seconds) = @_;
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'replica_gate replay watcher'");
	my $before = (rg_schedstat($pid))[2];
	sleep $seconds;
	return (rg_schedstat($pid))[2] - $before;
}

# rg_schedstat($pid)
#	/proc/PID/schedstat: the time the process ran and the time it waited
#	for a CPU so far (ns), and how many times it was scheduled in.
sub rg_schedstat
{
	my ($pid) = @_;
	open(my $f, '<', "/proc/$pid/schedstat") or die "schedstat of $pid: $!";
	my @fields = split ' ', <$f>;
	close $f;
	return @fields;
}

# RG_IN_GATE: an SQL condition on a pg_stat_activity row, true while its
# session sleeps in a gate.  Gates show wait event type Extension, or on
# 19+, where they wait in core's registry, core's WaitForWal* events.
use constant RG_IN_GATE =>
  "(wait_event_type = 'Extension' OR wait_event LIKE 'WaitForWal%')";

# rg_pid_of($node, $appname)
#	Wait until the session named $appname sleeps in a gate; return its pid.
sub rg_pid_of
{
	my ($node, $appname) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE application_name = '$appname' AND @{[RG_IN_GATE]}")
	  or die "session $appname never started waiting";
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = '$appname'");
}

# rg_token_lsn($target)
#	The LSN of a token ("timeline:LSN"), or $target itself if it is an LSN.
#	A wait for it alone does not re-check a timeline every 100 ms, which
#	would hide a lost wake-up.
sub rg_token_lsn
{
	my ($target) = @_;
	return $target =~ s/^.*://r;
}

# rg_probe_start($node, $target, $appname, @pids)
#	A session that spins until replay on $node passes $target (an LSN, or
#	the LSN of a token), or recovery ends, and notes that moment (server
#	clock) for rg_probe_time, and just before it how long each of the
#	processes @pids of $node has waited for a CPU so far (rg_queued_ns:
#	first, as the processes that the moment wakes preempt the probe,
#	which has used up its time).  It marks when a waiter could first have
#	returned; a standby cannot create a function, so it is a DO block.
#	Returns once the probe runs, or replay passed: a probe that started
#	after replay passed would note a later moment and hide a late waiter
#	(rg_probe_time fails a probe that never spun).
sub rg_probe_start
{
	my ($node, $target, $appname, @pids) = @_;
	my $lsn = rg_token_lsn($target);
	my $queued = rg_queued_ns(@pids);
	my $h = rg_bg_start($node, qq{DO \$\$ DECLARE spins bigint := 0; queued text; BEGIN
		WHILE pg_is_in_recovery() AND coalesce(pg_last_wal_replay_lsn() < '$lsn', true) LOOP
			spins := spins + 1;
		END LOOP;
		queued := $queued;
		RAISE NOTICE 'passed at % after % spins, queued %', extract(epoch FROM clock_timestamp()), spins, queued;
		END \$\$},
		$appname);
	# (or until replay passed or recovery ended: a probe that found it so
	# at once is gone)
	$node->poll_query_until('postgres', qq{SELECT EXISTS (SELECT FROM pg_stat_activity
		 WHERE application_name = '$appname' AND state = 'active')
		 OR NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= '$lsn'})
	  or die "probe $appname never started";
	return $h;
}

# rg_probe_time($h)
#	Finish a probe and return the moment it noted (epoch seconds), and in
#	list context after it how long each of its processes had waited for a
#	CPU then (ns), in the order given.
sub rg_probe_time
{
	my ($h) = @_;
	rg_bg_finish($h);
	my ($t, $spins, $queued) = $h->{stderr} =~ /passed at ([0-9.]+) after (\d+) spins, queued ([0-9 ]*)/;
	die "the probe failed: $h->{stderr}" unless defined $t;
	die "the probe found replay past its target at its first look: it marks nothing"
	  unless $spins > 0;
	return wantarray ? ($t, split(' ', $queued)) : $t;
}

# rg_queued_ns(@pids)
#	An SQL expression: how long (ns) each process of @pids (pids, or SQL
#	expressions of them) has waited for a CPU so far, runnable but not
#	running (the second field of /proc/PID/schedstat; Linux only), as text
#	separated by spaces.  The server reads it as the statement evaluates
#	it, not when a loaded machine lets the test's client run: this is the
#	time a machine's load adds to a wake-up.
sub rg_queued_ns
{
	return "coalesce((SELECT string_agg(split_part(pg_read_file('/proc/' || p || '/schedstat'), ' ', 2), ' ' ORDER BY o) "
	  . "FROM unnest(ARRAY[@{[join(', ', @_)]}]::int[]) WITH ORDINALITY AS a(p, o)), '')";
}

# rg_noted_at()
#	SQL that notes the moment, and how long this session's process has
#	waited for a CPU so far: psql prints "epoch|ns" (rg_wake_lag).
sub rg_noted_at
{
	return 'SELECT extract(epoch FROM clock_timestamp()), ' . rg_queued_ns('pg_backend_pid()');
}

# rg_woke_at($gate)
#	SQL that runs the gate expression $gate as a statement of its own (so
#	that it sleeps on its latch, without watching replay for conflicts) and
#	then notes the moment it returned: psql prints "result\nepoch|ns".
sub rg_woke_at
{
	my ($gate) = @_;
	return "SELECT $gate; " . rg_noted_at();
}

# rg_wake_lag($noted, $passed, @queued)
#	How many ms after $passed (epoch seconds: when replay passed the
#	target, rg_probe_time) a waiter returned, from a note "epoch|ns ..."
#	(rg_noted_at, or any moment followed by rg_queued_ns counts), less the
#	time each process noted waited for a CPU since its count in @queued
#	(rg_schedstat's second field, taken while the waiter slept; undef:
#	nothing is taken off for it); and in list context that time.  A loaded
#	machine makes a woken process wait for a CPU; a lost wake-up leaves it
#	asleep, which is not counted, so it still shows.  A missing note
#	counts as 1e9 ms.
sub rg_wake_lag
{
	my ($noted, $passed, @queued) = @_;
	my ($at, $counts) = ($noted // '') =~ /^([0-9.]+)\|([0-9 ]*)$/ or return (1e9, 0);
	my @now = split ' ', $counts;
	my $queued_ms = 0;
	$queued_ms += (($now[$_] // 0) - $queued[$_]) / 1e6 for grep { defined $queued[$_] } 0 .. $#queued;
	return (($at - $passed) * 1000 - $queued_ms, $queued_ms);
}

# How soon, in ms, a waiter must return after replay passes its target: it
# takes about 1 ms; the rest is room for a loaded 2-core machine.  Far below
# any re-check interval: a lost wake-up shows as 100 ms to 1 s or more.
use constant RG_WAKE_BOUND_MS => 50;

# rg_replay_holds($standby, $log_offset)
#	How long (ms) the startup process of $standby waited on each recovery
#	conflict that lasted longer than deadlock_timeout, from its log after
#	$log_offset (needs log_recovery_conflict_waits, 14+).  A wait still
#	going on counts as 1e9 ms.
sub rg_replay_holds
{
	my ($standby, $offset) = @_;
	my $log = PostgreSQL::Test::Utils::slurp_file($standby->logfile, $offset);
	my @holds = $log =~ /recovery finished waiting after ([0-9.]+) ms/g;
	my $started = () = $log =~ /recovery still waiting after/g;
	push @holds, (1e9) x ($started - @holds) if $started > @holds;
	return @holds;
}

# rg_conflict_sampler($standby, $until)
#	Sample the startup process of $standby about every 5 ms (psql's \watch:
#	one short transaction a sample) until the SQL condition $until holds,
#	or until WAL received is replayed when none is given.  For 13, which
#	cannot log how long replay waited on a conflict.  The sampler ends
#	itself: the sample that finds $until true divides by zero, which ends
#	\watch, and psql exits at the end of its input, writing out what it
#	printed (a signal would lose that).
sub rg_conflict_sampler
{
	my ($node, $until) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $h = { out => "$dir/samples", stderr => '' };
	$until //= 'true';
	# files, not pipes: psql gets its input at once and never waits for
	# its reader
	PostgreSQL::Test::Utils::append_to_file("$dir/sampler.sql",
		"SELECT extract(epoch FROM clock_timestamp()), wait_event_type, "
		  . "wait_event, pg_last_wal_replay_lsn(), "
		  . "1 / (NOT (($until) AND pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()))::int "
		  . "FROM pg_stat_activity WHERE backend_type = 'startup' \\watch 0.005\n");
	$h->{run} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-f', "$dir/sampler.sql" ],
		'<', \undef, '>', $h->{out}, '2>', \$h->{stderr},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return $h;
}

# rg_conflict_longest($h)
#	Wait for the sampler to end.  Returns the longest time (ms) it saw the
#	startup process wait on a recovery conflict (a snapshot, a tablespace,
#	a lock, a buffer pin) without its replay position moving, and the
#	number of samples.  A wait seen that long lasted at most one sample
#	interval more.
sub rg_conflict_longest
{
	my ($h) = @_;
	$h->{run}->finish;
	my ($longest, $first, $at, $n) = (0, undef, '', 0);
	for my $line (split /\n/, PostgreSQL::Test::Utils::slurp_file($h->{out}))
	{
		my ($t, $type, $event, $lsn) = split /\|/, $line;
		next unless defined $lsn && $t =~ /^[0-9.]+$/;
		$n++;
		if (!($type eq 'Lock' || $type eq 'BufferPin'
			|| $event =~ /^RecoveryConflict(Snapshot|Tablespace)$/))
		{
			undef $first;
			next;
		}
		($first, $at) = ($t, $lsn) if !defined $first || $lsn ne $at;
		$longest = ($t - $first) * 1000 if ($t - $first) * 1000 > $longest;
	}
	return ($longest, $n);
}

# rg_strong_counter($primary, $timeout)
#	A table "counter" of one row (v = 0) and a role "reader" that may read
#	it, every session of it in the session mode consistency = strong with a
#	default timeout of $timeout.
sub rg_strong_counter
{
	my ($primary, $timeout) = @_;
	$primary->safe_psql('postgres', qq{
CREATE TABLE counter (v int);
INSERT INTO counter VALUES (0);
CREATE ROLE reader LOGIN;
GRANT SELECT ON counter TO reader;
ALTER ROLE reader SET replica_gate.consistency = 'strong';
ALTER ROLE reader SET replica_gate.default_timeout = '$timeout';
});
}

# rg_pause_replay($standby)
#	Pause replay and, from 14 on, wait until it has paused.  The startup
#	process reads the request without a lock before each record, so it may
#	replay one more record after it; 13 cannot tell when it took effect.
sub rg_pause_replay
{
	my ($node) = @_;
	$node->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
	return if rg_major($node) < 14;
	$node->poll_query_until('postgres',
		"SELECT pg_get_wal_replay_pause_state() = 'paused'")
	  or die 'replay did not pause';
}

# rg_median(@values)
sub rg_median
{
	my @v = sort { $a <=> $b } @_;
	return $v[ int(@v / 2) ];
}

1;
