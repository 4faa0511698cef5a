# Paths where a token or a staleness bound could say "fresh" when it is not,
# each provoked on a real primary and standby:
# - a commit made with synchronous_commit = off is visible on the primary
#   before its WAL is flushed and sent; require_fresh() must not pass while
#   such a commit, older than its limit, is missing here;
# - a commit becomes visible on a standby during its redo, before the replay
#   position moves past it; seen_token() taken after a read that saw it must
#   cover it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;
use Time::HiRes qw(usleep);

# A WAL writer that flushes every 10 s keeps an asynchronous commit unsent
# for seconds; nothing else flushes WAL on this primary (no autovacuum, no
# background writer).  The standby hears from the primary every 0.5 s.
my ($primary, $standby) = rg_primary_standby(
	primary_conf =>
	  "wal_writer_delay = '10s'\nautovacuum = off\nbgwriter_lru_maxpages = 0\n",
	standby_conf =>
	  "wal_receiver_timeout = '1s'\nwal_receiver_status_interval = '1s'\n");

# --- an asynchronous commit missing from the standby -------------------------
$primary->safe_psql('postgres', 'CREATE TABLE async_t (v int)');
$primary->wait_for_catchup($standby->name, 'replay');

# Returns the token of an asynchronous commit of row $v whose WAL was not yet
# flushed 1.5 s later, or undef.  A first asynchronous commit makes the WAL
# writer flush (its previous flush is long past); the second one, right after
# it, then waits for the WAL writer's next round, 10 s later.
sub unflushed_async_commit
{
	my ($v) = @_;
	my $first = $primary->safe_psql('postgres',
		"SET synchronous_commit = off; INSERT INTO async_t VALUES (-$v); "
		  . 'SELECT replica_gate.last_commit_lsn()');
	$primary->poll_query_until('postgres',
		"SELECT pg_current_wal_flush_lsn() >= '$first'")
	  or die 'the first asynchronous commit was never flushed';
	my $token = $primary->safe_psql('postgres',
		"SET synchronous_commit = off; INSERT INTO async_t VALUES ($v); "
		  . 'SELECT replica_gate.last_commit_token()');
	usleep(1_500_000);
	(my $lsn = $token) =~ s/^\d+://;
	return $primary->safe_psql('postgres',
		"SELECT pg_current_wal_flush_lsn() < '$lsn'") eq 't' ? $token : undef;
}

my $token;
for my $try (1 .. 3)
{
	$token = unflushed_async_commit($try);
	last if defined $token;
}
ok(defined $token,
	'an asynchronous commit is visible on the primary, unflushed 1.5 s later');

my ($ret, $out, $err) = $standby->psql(
	'postgres', q{
\set VERBOSITY verbose
SELECT replica_gate.require_fresh('1 s', 2000);
SELECT count(*) FROM async_t WHERE v > 0;});
like($err, qr/RG001/,
	'require_fresh(1 s) refuses while a commit visible for 1.5 s is missing');
is($out, '', 'and no read ran');
cmp_ok(
	$standby->safe_psql('postgres',
		'SELECT extract(epoch FROM replica_gate.staleness()) * 1000'),
	'>=', 1500, 'staleness() covers the missing commit');

# Once it is flushed (a synchronous commit flushes all WAL before it), the
# bound is small again: as soon as the standby has heard so from the
# primary, which on a machine with a load average of 13 took more than 2 s
# (a bound of 3.4 s then); the gate's budget is how long it may wait for
# that, not a bound it checks.
my $sync = $primary->safe_psql('postgres',
	'INSERT INTO async_t VALUES (0); SELECT replica_gate.last_commit_token()');
is( $standby->safe_psql(
		'postgres', qq{
SELECT replica_gate.require_lsn('$sync', 10000);
SELECT replica_gate.require_fresh('1 s', 10000);
SELECT count(*) FROM async_t WHERE v > 0;}),
	"\n\n1",
	'after a synchronous commit: require_fresh passes, the row is there');

# --- a commit visible before the replay position passes it -----------------
# The redo of a commit that drops 1000 tables unlinks their files after the
# commit became visible and before the replay position moves past it.
$primary->safe_psql(
	'postgres', q{
CREATE TABLE marker (v int);
CREATE FUNCTION seen_after_marker() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	give_up timestamptz := clock_timestamp() + interval '60 s';
BEGIN
	WHILE clock_timestamp() < give_up LOOP
		IF EXISTS (SELECT FROM marker) THEN
			RETURN replica_gate.seen_token();
		END IF;
	END LOOP;
	RETURN NULL;
END $$;
DO $$
BEGIN
	FOR i IN 1..1000 LOOP
		EXECUTE format('CREATE TABLE drop_%s (v int)', i);
	END LOOP;
END $$;});
$primary->wait_for_catchup($standby->name, 'replay');

my $reader = rg_bg_start($standby, 'SELECT seen_after_marker()', 'seen_reader');
$standby->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'seen_reader' "
	  . "AND state = 'active'")
  or die 'the reader never started';
my $drop = join(', ', map { "drop_$_" } 1 .. 1000);
my $commit = $primary->safe_psql('postgres',
	"BEGIN; DROP TABLE $drop; INSERT INTO marker VALUES (1); COMMIT; "
	  . 'SELECT replica_gate.last_commit_token()');
rg_bg_finish($reader);
my $seen = $reader->{stdout};
(my $seen_lsn = $seen) =~ s/^\d+://;
(my $commit_lsn = $commit) =~ s/^\d+://;
ok( $seen ne ''
	  && $standby->safe_psql('postgres',
		"SELECT '$seen_lsn'::pg_lsn >= '$commit_lsn'::pg_lsn") eq 't',
	"seen_token() after reading the commit covers it ($seen, commit $commit)");

done_testing();
