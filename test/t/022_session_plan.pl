# A statement gated by the session mode or the token floor runs with a plan
# as new as its snapshot.  It is parsed and planned before its gate, then
# waits; whatever catalog change replay applies meanwhile (one acknowledged
# on the primary before the read began) must be in its plan, not only in
# its snapshot: a child table added to an inheritance tree, a table made a
# child, an inlined SQL function replaced, a partition attached, an index
# dropped concurrently, a table truncated by VACUUM, a new overload of a
# function for a portal bound before another portal's gate and for
# statements prepared before the gate (protocol-level and PREPARE, read
# committed and repeatable read, and PREPARE executed through the
# protocol).  Each change is
# committed on the primary while the standby's replay is paused, then the
# read starts and waits, then replay resumes: the read must return what
# the primary returns, through the simple and the extended protocol, in
# the session mode and under replica_gate.read_after.  And a waiting
# statement, first in its transaction, holds no lock: replay is never held
# back by it (VACUUM's truncation needs an AccessExclusiveLock).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RgTest;
use Test::More;

my ($primary, $standby) = rg_primary_standby(
	primary_conf => "autovacuum = off\n",
	standby_conf => "max_standby_streaming_delay = -1\nhot_standby_feedback = off\n");
$primary->safe_psql('postgres', q{
CREATE ROLE reader LOGIN;
ALTER ROLE reader SET replica_gate.consistency = 'strong';
ALTER ROLE reader SET replica_gate.default_timeout = '20s';
ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO reader;
CREATE TABLE p (v int);
INSERT INTO p VALUES (1);
CREATE TABLE r (v int);
CREATE TABLE r5 (v int);
INSERT INTO r5 VALUES (5);
CREATE FUNCTION answer() RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION pick(numeric) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION choose(numeric) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION elect(numeric) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION vote(numeric) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION poll(numeric) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE TABLE parted (v int) PARTITION BY RANGE (v);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
INSERT INTO parted VALUES (1);
CREATE TABLE ix (id int, v int);
INSERT INTO ix SELECT i, i FROM generate_series(1, 1000) i;
CREATE INDEX ix_id ON ix (id);
CREATE TABLE par (v int);
CREATE TABLE kid (v int);
INSERT INTO kid VALUES (1);
CREATE TABLE trunc (v int);
INSERT INTO trunc SELECT generate_series(1, 10000);
CREATE SCHEMA shade;
GRANT USAGE ON SCHEMA shade TO reader;
CREATE DOMAIN dom1 AS int CHECK (VALUE > 0);
CREATE DOMAIN dom2 AS int CHECK (VALUE > 0);
CREATE DOMAIN dom3 AS int;
CREATE DOMAIN dom4 AS int;
CREATE DOMAIN dom5 AS int CHECK (VALUE > 0);
CREATE TABLE tx (t text);
INSERT INTO tx VALUES ('5');
CREATE TABLE types_t (t regtype);
INSERT INTO types_t VALUES ('dom3');
CREATE FUNCTION halves() RETURNS text LANGUAGE sql AS 'SELECT (5::dom4 / 2)::text';
});
$primary->wait_for_catchup($standby->name, 'replay');
my $reader = $standby->connstr('postgres') . ' user=reader';

# read_during($change, $sql, %opts)
#	Pause replay on the standby, run $change on the primary (acknowledged),
#	start $sql on the standby as "reader", wait until it waits in its gate,
#	resume replay; returns (stdout, stderr) of the read.  With proto =>
#	'extended' the read goes through psycopg with a parameter ("%s", bound
#	to 0) as a statement prepared and executed once before the change:
#	its plan is cached, and checked at Bind.  "conn" adds connection
#	options.  "cmd" (a function of the connection string and the
#	application name) gives another client's command line.
my $n = 0;
sub read_during
{
	my ($change, $sql, %opts) = @_;
	my $app = 'plan_reader_' . ++$n;
	my $dsn = "$reader application_name=$app " . ($opts{conn} // '');
	my ($out, $err) = ('', '');
	my $go = PostgreSQL::Test::Utils::tempdir . '/go';
	my $extended = ($opts{proto} // '') eq 'extended';
	my @cmd = $extended
	  ? ('/usr/bin/python3', '-c', q{
import os, sys, time, psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as c:
    c.execute(sys.argv[2], [0], prepare=True).fetchone()
    print("ready", flush=True)
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.01)
    print(c.execute(sys.argv[2], [0], prepare=True).fetchone()[0])
}, $dsn, $sql, $go)
	  : $opts{cmd} ? $opts{cmd}->($dsn, $app)
	  : ('psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $dsn, '-c', $sql);
	my $h;
	if ($extended)
	{
		$h = IPC::Run::start(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		$h->pump until $out =~ /ready\n/ || $err ne '';
	}
	rg_pause_replay($standby);
	$primary->safe_psql('postgres', $change);
	if ($extended)
	{
		$out = '';
		PostgreSQL::Test::Utils::append_to_file($go, '');
	}
	else
	{
		$h = IPC::Run::start(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	}
	rg_pid_of($standby, $app);
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
	$h->finish;
	chomp $out;
	$primary->wait_for_catchup($standby->name, 'replay');
	return ($out, $err);
}

# check($name, $change, $sql, %opts): the read returns what the primary does.
# "search_path" sets the search path of both.
sub check
{
	my ($name, $change, $sql, %opts) = @_;
	my $path = '';
	if ($opts{search_path})
	{
		$opts{conn} = "options=-csearch_path=$opts{search_path}";
		$path = "SET search_path = $opts{search_path}; ";
	}
	my ($out, $err) = read_during($change, $sql, %opts);
	(my $psql_sql = $sql) =~ s/%s/0/g;
	my $want = $primary->safe_psql('postgres', $path . $psql_sql);
	is($out, $want, "$name: the read returns what the primary returns ($want)")
	  or diag("stderr: $err");
}

check('a child table added to an inheritance tree',
	'CREATE TABLE c2 () INHERITS (p); INSERT INTO c2 VALUES (2)',
	'SELECT count(*) FROM p');
check('a table made a child (ALTER TABLE ... INHERIT)',
	'ALTER TABLE r5 INHERIT r', 'SELECT count(*) FROM r');
check('an inlined SQL function replaced',
	q{CREATE OR REPLACE FUNCTION answer() RETURNS int LANGUAGE sql AS 'SELECT 2'},
	'SELECT answer()');
check('a partition attached',
	'CREATE TABLE parted_2 (v int); INSERT INTO parted_2 VALUES (150); '
	  . 'ALTER TABLE parted ATTACH PARTITION parted_2 FOR VALUES FROM (100) TO (200)',
	'SELECT count(*) FROM parted');
check('an index the plan uses dropped concurrently',
	'DROP INDEX CONCURRENTLY ix_id',
	'SELECT v FROM ix WHERE id = 500', conn => 'options=-cenable_seqscan=off');
check('a table truncated by VACUUM (replay takes an AccessExclusiveLock)',
	'DELETE FROM trunc; VACUUM trunc', 'SELECT count(*) FROM trunc');

# The extended protocol: a statement with a parameter, planned at Bind.
check('extended protocol: a child table added',
	'CREATE TABLE c3 () INHERITS (p); INSERT INTO c3 VALUES (3)',
	'SELECT count(*) + %s FROM p', proto => 'extended');
# A table made a child, which sends relation-cache messages only: in a
# session that gated before (the first gate of a session plans again
# anyway), a relation its plan uses.
check('extended protocol: a table made a child (relation-cache messages only)',
	'ALTER TABLE kid INHERIT par', 'SELECT count(*) + %s FROM par', proto => 'extended');
check('extended protocol: an inlined SQL function replaced',
	q{CREATE OR REPLACE FUNCTION answer() RETURNS int LANGUAGE sql AS 'SELECT 3'},
	'SELECT answer() + %s', proto => 'extended');

# A type created earlier in the search path sends messages of pg_type alone,
# which stay pending past gates whose statements cannot resolve a type
# (replan.c): each way a statement can must plan again.  A domain of
# numeric in "shade" now shadows one of int in "public": a cast names it; a
# one-argument call of no function is a cast to the type named like it, and
# so is a field selection of no field; a literal in a list with a regtype
# column is read as a type's name; an inlined SQL function names it in its
# body.  (Those of the cast, the call and the field selection have a
# constraint: a coercion to a domain without one is planned as a
# relabelling, and the plan then lists the domain among the objects it
# depends on, which alone would make the gate plan again.)
check('extended protocol: a type created earlier in the search path, named in a cast',
	'CREATE DOMAIN shade.dom1 AS numeric', 'SELECT ((5 + %s)::dom1 / 2)::text',
	proto => 'extended', search_path => 'shade,public');
check('extended protocol: a type created earlier in the search path, called like a function',
	'CREATE DOMAIN shade.dom2 AS numeric', 'SELECT CASE WHEN dom2(t) / 2 > 2 THEN 1 ELSE 0 END + %s FROM tx',
	proto => 'extended', search_path => 'shade,public');
check('extended protocol: a type created earlier in the search path, selected like a field',
	'CREATE DOMAIN shade.dom5 AS numeric', 'SELECT CASE WHEN (t).dom5 / 2 > 2 THEN 1 ELSE 0 END + %s FROM tx',
	proto => 'extended', search_path => 'shade,public');
check('extended protocol: a type created earlier in the search path, named by a literal read as a regtype',
	'CREATE DOMAIN shade.dom3 AS numeric', q{SELECT count(*) + %s FROM types_t WHERE t IN ('dom3', 'int4')},
	proto => 'extended', search_path => 'shade,public');
check('extended protocol: a type created earlier in the search path, named in an inlined function',
	'CREATE DOMAIN shade.dom4 AS numeric', 'SELECT halves() FROM tx WHERE %s = 0',
	proto => 'extended', search_path => 'shade,public');

# The token floor, in eventual mode: the same rule.
my $floor = sub {
	my ($change) = @_;
	return $primary->safe_psql('postgres',
		"$change; SELECT replica_gate.last_commit_token()");
};
{
	rg_pause_replay($standby);
	my $token = $floor->('CREATE TABLE c4 () INHERITS (p); INSERT INTO c4 VALUES (4)');
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d',
		  "$reader application_name=floor_reader options=-creplica_gate.consistency=eventual",
		  '-c', "SET replica_gate.read_after = '$token'", '-c', 'SELECT count(*) FROM p' ],
		'<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	rg_pid_of($standby, 'floor_reader');
	$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
	$h->finish;
	chomp $out;
	is($out, $primary->safe_psql('postgres', 'SELECT count(*) FROM p'),
		'read_after: a child table added is in the plan') or diag("stderr: $err");
}

# Two portals bound before either runs (the extended protocol allows it,
# libpq does not): the first, an EXPLAIN ANALYZE, gates when it is
# executed; the second, a SELECT, gates at its Bind, between the first's
# parse analysis and its run, and consumes there the change the first one
# was analysed without (a function that a call now resolves to).  The
# first must still be planned again when it runs.
{
	my ($out, $err) = read_during(
		q{CREATE FUNCTION pick(int) RETURNS int LANGUAGE sql AS 'SELECT 2'}, undef,
		cmd => sub {
			my ($dsn, $app) = @_;
			return ('/usr/bin/python3', "$FindBin::RealBin/../clients/rg_portals.py",
				$standby->host, $standby->port, 'reader', $app,
				'EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT pick(1)',
				'SELECT pick(1)');
		});
	my $want = $primary->safe_psql('postgres', 'SELECT pick(1)');
	like($out, qr/\A$want\n-- SELECT 1\n/,
		"two portals: the one gated at its Bind returns what the primary returns ($want)")
	  or diag("stdout: $out\nstderr: $err");
	like($out, qr/^\s*Output: $want$/m,
		'the one bound before it, run after, is planned again: it calls the new function')
	  or diag("stdout: $out\nstderr: $err");
}

# A statement prepared while replay lags keeps what its parse analysis
# resolved: PostgreSQL's plan cache checks a saved plan at Bind against
# the objects it uses, not against a new overload of a function it calls.
# Prepared (Parse) after the new overload was acknowledged but before the
# standby replayed it, then executed: the first execution waits in its
# gate and is planned again; the second, which waits for nothing, must not
# fall back to the saved analysis.  Then the same with PREPARE, and
# EXECUTE in a REPEATABLE READ transaction gated at its BEGIN.
{
	my ($out, $err) = read_during(
		q{CREATE FUNCTION choose(int) RETURNS int LANGUAGE sql AS 'SELECT 2'}, undef,
		cmd => sub {
			my ($dsn) = @_;
			return ('/usr/bin/python3', '-c', q{
import sys, psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as c:
    for _ in range(2):
        print(c.execute("SELECT choose(1) + %s", [0], prepare=True).fetchone()[0], flush=True)
}, $dsn);
		});
	my $want = $primary->safe_psql('postgres', 'SELECT choose(1)');
	is($out, "$want\n$want",
		"a statement prepared while replay lagged: both executions return what the primary returns ($want)")
	  or diag("stderr: $err");

	($out, $err) = read_during(
		q{CREATE FUNCTION elect(int) RETURNS int LANGUAGE sql AS 'SELECT 2'}, undef,
		cmd => sub {
			my ($dsn) = @_;
			return ('psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $dsn,
				'-c', 'PREPARE q AS SELECT elect(1)',
				'-c', 'BEGIN ISOLATION LEVEL REPEATABLE READ',
				'-c', 'EXECUTE q', '-c', 'COMMIT');
		});
	$want = $primary->safe_psql('postgres', 'SELECT elect(1)');
	is($out, $want,
		"PREPARE while replay lagged, EXECUTE in REPEATABLE READ: what the primary returns ($want)")
	  or diag("stderr: $err");
}

# A statement prepared by SQL PREPARE and executed through the protocol
# (Bind of the named statement, as drivers do: libpq's PQexecPrepared):
# its query string is the whole PREPARE command, and it must be planned
# again as the query it prepared.  Any replayed catalog change (a database created, a temporary table created
# in another database), a new overload of a function it calls (the new one
# is called), and one that changes its result type (RG001).
{
	my $sql_prepared = sub {
		my ($change, $prepare) = @_;
		return read_during($change, undef,
			cmd => sub {
				my ($dsn) = @_;
				return ('/usr/bin/python3', '-c', q{
import sys, psycopg
from psycopg.pq import ExecStatus
with psycopg.connect(sys.argv[1], autocommit=True) as c:
    c.execute(sys.argv[2])
    r = c.pgconn.exec_prepared(b"s", [])
    if r.status != ExecStatus.TUPLES_OK:
        sys.exit(r.error_message.decode())
    print("|".join(r.get_value(i, 0).decode() for i in range(r.ntuples)))
}, $dsn, $prepare);
			});
	};
	my ($out, $err) = $sql_prepared->(
		join("\n", 'CREATE DATABASE other;', '\\c other', 'CREATE TEMP TABLE tmp (v int);'),
		'PREPARE s AS SELECT count(*) FROM p;');
	my $want = $primary->safe_psql('postgres', 'SELECT count(*) FROM p');
	is($out, $want,
		"PREPARE, then a database and a temporary table created: executed through the protocol, the right rows ($want)")
	  or diag("stderr: $err");
	is($err, '', 'and no error (RG001 before)');

	($out, $err) = $sql_prepared->(
		q{CREATE FUNCTION vote(int) RETURNS int LANGUAGE sql AS 'SELECT 2'},
		'PREPARE s AS SELECT vote(1);');
	$want = $primary->safe_psql('postgres', 'SELECT vote(1)');
	is($out, $want,
		"PREPARE, then a new overload: executed through the protocol, it calls the new one ($want)")
	  or diag("stderr: $err");

	($out, $err) = $sql_prepared->(
		q{CREATE FUNCTION poll(int) RETURNS text LANGUAGE sql AS 'SELECT ''2'''},
		'PREPARE s AS SELECT poll(1);');
	like($err, qr/the statement changed while it waited for replay\n.*Its result columns changed/,
		'PREPARE, then a new overload of another result type: RG001, its result columns changed')
	  or diag("stdout: $out");
}

# Replans nobody needs (issue 40, item 6): a change that cannot alter what
# the session's statements resolve, replayed before a gate, must not make it
# plan anything again; one that can, must.  Seen through an IMMUTABLE
# function that returns the time it is called: the planner folds it into
# the plan, so a prepared statement's value changes exactly when it is
# planned again.  One session, its statements gated one after the other
# while the primary changes things: only catalog changes of another
# database (a temporary table created and dropped, a table created and
# analysed there, a database created) before the second EXECUTE; a table
# created in this database before the third, a new function overload
# before the fourth; then a domain created earlier in the search path.  A
# temporary table created and dropped in this database sends messages of
# pg_type as a new type does: seen through the DEBUG1 message of a gate
# that plans again, a statement that cannot resolve a type is not planned
# again, the next one that can is.
{
	$primary->safe_psql('postgres', q{
CREATE FUNCTION stamp() RETURNS text IMMUTABLE LANGUAGE plpgsql
AS $$ BEGIN RETURN clock_timestamp()::text; END $$;
CREATE SCHEMA shadow;
GRANT USAGE ON SCHEMA shadow TO reader;
CREATE DOMAIN public.dom AS int;});
	$primary->wait_for_catchup($standby->name, 'replay');
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', "$reader application_name=stamp_reader" ],
		'<', \$in, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	my $run = sub {
		my ($sql) = @_;
		$out = '';
		$in .= "$sql;\n\\echo __done\n";
		$h->pump until $out =~ /__done\n/ || $err =~ /ERROR/;
		die "stamp_reader: $err" if $err =~ /ERROR/;
		return (split /\n/, $out)[0];
	};
	$run->('PREPARE s AS SELECT stamp()');
	$run->('EXECUTE s');    # the session's first gate plans again: nothing was watched before
	my $first = $run->('EXECUTE s');
	is($run->('EXECUTE s'), $first, 'a prepared statement keeps its plan while nothing changes');
	$primary->safe_psql('other', q{
CREATE TEMP TABLE churn (v int); DROP TABLE churn;
CREATE TABLE other_t (v int); INSERT INTO other_t VALUES (1); ANALYZE other_t;
CREATE TEMP TABLE churn2 (v int);});
	$primary->safe_psql('postgres', 'CREATE DATABASE other2');
	$primary->wait_for_catchup($standby->name, 'replay');
	is($run->('EXECUTE s'), $first,
		'catalog changes of other databases replayed before the gate: not planned again');
	$primary->safe_psql('postgres', 'CREATE TABLE new_t (v int)');
	$primary->wait_for_catchup($standby->name, 'replay');
	my $second = $run->('EXECUTE s');
	isnt($second, $first, 'a table created in this database: planned again (it may shadow another)');
	$primary->safe_psql('postgres',
		q{CREATE FUNCTION stamp(int) RETURNS text LANGUAGE sql AS 'SELECT 1::text'});
	$primary->wait_for_catchup($standby->name, 'replay');
	isnt($run->('EXECUTE s'), $second, 'a new function overload: planned again');

	# (one session on the primary: its first temporary table creates its
	# temporary schema, a change of pg_namespace, which replans)
	my ($pin, $pout) = ('', '');
	my $ph = IPC::Run::start([ 'psql', '-XAtq', '-d', $primary->connstr('postgres') ],
		'<', \$pin, '>', \$pout, '2>', \$pout,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	my $on_primary = sub {
		$pin .= "$_[0];\n\\echo __done\n";
		$ph->pump until $pout =~ /__done\n/;
		$pout = '';
	};
	$on_primary->('CREATE TEMP TABLE warm (v int)');
	$primary->wait_for_catchup($standby->name, 'replay');
	$run->('SET client_min_messages = debug1');
	$run->('SELECT 2 + 3');
	$on_primary->('CREATE TEMP TABLE churn (v int); DROP TABLE churn');
	$primary->wait_for_catchup($standby->name, 'replay');
	$err = '';
	is($run->('SELECT 2 + 3'), '5', 'a temporary table created and dropped in this database: a statement that names no type');
	unlike($err, qr/planning again/, 'is not planned again');
	$err = '';
	is($run->('SELECT 2::int + 3'), '5', 'then one that names a type');
	like($err, qr/replay changed the catalog before the gate: planning again/,
		'is planned again: the change of pg_type was still pending');
	$err = '';
	$run->('SELECT 2::int + 3');
	unlike($err, qr/planning again/, 'and no longer pending after');
	$run->('SET client_min_messages = notice');
	$pin .= "\\q\n";
	$ph->finish;

	# A new type shadowing another in the search path: a domain created
	# sends messages of pg_type alone (PostgreSQL's plan cache would keep
	# the old one).
	$run->('SET search_path = shadow, public');
	$run->('PREPARE half AS SELECT (5::dom / 2)::text');
	is($run->('EXECUTE half'), '2', 'through public.dom, an integer: 2');
	$primary->safe_psql('postgres', 'CREATE DOMAIN shadow.dom AS numeric');
	$primary->wait_for_catchup($standby->name, 'replay');
	is($run->('EXECUTE half'),
		$primary->safe_psql('postgres', 'SET search_path = shadow, public; SELECT (5::dom / 2)::text'),
		'a domain created earlier in the search path: planned again, what the primary returns');

	$in .= "\\q\n";
	$h->finish;
}

is($standby->safe_psql('postgres', 'SELECT replica_gate.waiters()'), '0', 'no waiter left');
done_testing();
