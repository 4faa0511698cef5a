-- Single-node behaviour of the gates on a primary: NULLs, bad input,
-- timeouts, snapshot rules and error texts.  Standby behaviour is covered by
-- the TAP tests in test/t.
CREATE EXTENSION replica_gate;

-- Run a statement, return its SQLSTATE, message, detail and hint, with this
-- server's varying WAL positions masked.
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	detail text;
	hint text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL,
		hint = PG_EXCEPTION_HINT;
	RETURN regexp_replace(concat_ws(E'\n', SQLSTATE || ': ' || msg,
									nullif('DETAIL: ' || detail, 'DETAIL: '),
									nullif('HINT: ' || hint, 'HINT: ')),
						  'position [0-9A-F]+/[0-9A-F]+', 'position X/X');
END $$;

-- On a primary everything up to the WAL insert position is caught up.
SELECT replica_gate.caught_up('0/0');
SELECT replica_gate.caught_up(pg_current_wal_insert_lsn());
SELECT replica_gate.wait_for_lsn(pg_current_wal_insert_lsn());
SELECT replica_gate.wait_for_lsn(pg_current_wal_insert_lsn(), 0);
SELECT replica_gate.require_lsn(pg_current_wal_insert_lsn(), 100);
-- ... and a target beyond it cannot be a token of this server.
SELECT pg_temp.err($$SELECT replica_gate.caught_up('FFFFFFFF/FFFFFFFF')$$);
SELECT pg_temp.err($$SELECT replica_gate.wait_for_lsn('FFFFFFFF/FFFFFFFF', 10)$$);
SELECT pg_temp.err($$SELECT replica_gate.require_lsn('FFFFFFFF/FFFFFFFF')$$);

-- Wait modes: on a primary 'write' and 'flush' flush the WAL up to the
-- target, so that it is on disk here; anything else is refused.
SELECT replica_gate.caught_up(pg_current_wal_insert_lsn(), 'write');
SELECT replica_gate.wait_for_lsn(pg_current_wal_insert_lsn(), 0, 'flush');
SELECT replica_gate.require_lsn(pg_current_wal_insert_lsn(), NULL, 'replay');
SELECT pg_current_wal_insert_lsn() AS target \gset
SELECT replica_gate.wait_for_lsn(:'target', mode => 'flush'),
       pg_current_wal_flush_lsn() >= :'target' AS flushed;
SELECT pg_temp.err($$SELECT replica_gate.caught_up('0/1', 'apply')$$);
SELECT pg_temp.err($$SELECT replica_gate.wait_for_lsn('0/1', 0, 'REPLAY')$$);
SELECT pg_temp.err($$SELECT replica_gate.require_lsn('0/1', 0, NULL)$$);
SELECT pg_temp.err($$SELECT replica_gate.caught_up(NULL, 'x')$$);
SELECT pg_temp.err($$SELECT replica_gate.caught_up('FFFFFFFF/FFFFFFFF', 'flush')$$);

-- Tokens "<timeline>:<lsn>": on this primary's timeline 1 they compare
-- LSNs; a newer timeline is one this primary will never reach (RG003).
SELECT replica_gate.last_commit_token() ~ '^1:[0-9A-F]+/[0-9A-F]+$' AS write_token,
       split_part(replica_gate.last_commit_token(), ':', 2)::pg_lsn
         = replica_gate.last_commit_lsn() AS same_lsn,
       replica_gate.seen_token() ~ '^1:[0-9A-F]+/[0-9A-F]+$' AS read_token;
SELECT replica_gate.caught_up(replica_gate.last_commit_token()),
       replica_gate.wait_for_lsn(replica_gate.seen_token(), 0),
       replica_gate.require_lsn('1:0/1');
SELECT pg_temp.err($$SELECT replica_gate.caught_up('1:FFFFFFFF/FFFFFFFF')$$);
SELECT pg_temp.err($$SELECT replica_gate.caught_up('7:FFFFFFFF/FFFFFFFF')$$);
SELECT pg_temp.err($$SELECT replica_gate.require_lsn('7:0/1', 0, 'flush')$$) ~ '^RG003' AS newer_timeline;
-- the text overload takes plain LSNs too; malformed text is 22P02
SELECT replica_gate.caught_up('0/1'), replica_gate.caught_up('0/1'::text);
SELECT pg_temp.err(format($$SELECT replica_gate.caught_up(%L)$$, t))
  FROM unnest(ARRAY['junk', '1:junk', ':0/1', '0:0/1', 'x:0/1', '1:', '1:0/1:2',
                    '4294967296:0/1', '-1:0/1', ' 1:0/1']) t;
SET replica_gate.require_lsn = '1:0/1';
SHOW replica_gate.require_lsn;
RESET replica_gate.require_lsn;

-- NULL target: no write to wait for, the gates pass.
SELECT replica_gate.caught_up(NULL);
SELECT replica_gate.wait_for_lsn(NULL);
SELECT replica_gate.wait_for_lsn(NULL, 0);
SELECT replica_gate.require_lsn(NULL, NULL);

-- Timeouts: NULL means the default, negative are errors.  (The cap by
-- max_timeout only shows on a standby, where gates wait: see test/t.)
SELECT replica_gate.wait_for_lsn('0/1', NULL);
SELECT replica_gate.wait_for_lsn('0/1', 2147483647);
SELECT pg_temp.err($$SELECT replica_gate.wait_for_lsn('0/1', -1)$$);
SELECT pg_temp.err($$SELECT replica_gate.require_lsn('0/1', -1)$$);
SELECT pg_temp.err($$SELECT replica_gate.wait_for_lsn(NULL, -5)$$);
-- (no such function: only the first line, whose wording all versions share)
SELECT split_part(pg_temp.err($$SELECT replica_gate.wait_for_lsn('0/1', 2147483648)$$), E'\n', 1);

-- Malformed LSN text.
SELECT pg_temp.err($$SELECT replica_gate.caught_up('junk')$$);
SELECT pg_temp.err($$SELECT replica_gate.wait_for_lsn('1/2/3')$$);
SELECT pg_temp.err($$SELECT replica_gate.require_lsn('')$$);

-- REPEATABLE READ: a gate after the snapshot was taken is refused ...
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT replica_gate.caught_up('0/1');
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT 1;
SELECT replica_gate.wait_for_lsn('0/1', 0);
ROLLBACK;
-- ... except with nothing to wait for.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT replica_gate.require_lsn(NULL);
COMMIT;
-- READ COMMITTED is fine.
BEGIN;
SELECT replica_gate.require_lsn('0/1');
COMMIT;

-- The SET form.
SHOW replica_gate.require_lsn;
SET replica_gate.require_lsn = '0/1';
SHOW replica_gate.require_lsn;
BEGIN;
SET LOCAL replica_gate.require_lsn = '0/2';
SHOW replica_gate.require_lsn;
COMMIT;
SHOW replica_gate.require_lsn;
RESET replica_gate.require_lsn;
SHOW replica_gate.require_lsn;
SET replica_gate.require_lsn = '';
SET replica_gate.require_lsn TO DEFAULT;
-- as the first statement of a REPEATABLE READ transaction
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL replica_gate.require_lsn = '0/3';
SELECT 1;
SET LOCAL replica_gate.require_lsn = '0/4';
ROLLBACK;
-- bad values and the ways that would not wait
SET replica_gate.require_lsn = 'junk';
SET replica_gate.require_lsn = '0/1', '0/2';
\set VERBOSITY sqlstate
SET replica_gate.require_lsn = 'FFFFFFFF/FFFFFFFF';
\set VERBOSITY default
SELECT set_config('replica_gate.require_lsn', '0/1', false);
ALTER ROLE CURRENT_USER SET replica_gate.require_lsn = '0/1';
CREATE FUNCTION pg_temp.f() RETURNS int LANGUAGE sql
	SET replica_gate.require_lsn = '0/1' AS 'SELECT 1';
\set SHOW_CONTEXT never
DO $$ BEGIN SET replica_gate.require_lsn = '0/1'; END $$;
CREATE PROCEDURE pg_temp.gate_in_procedure() LANGUAGE plpgsql AS $$
BEGIN
	SET replica_gate.require_lsn = '0/1';
END $$;
CALL pg_temp.gate_in_procedure();
\set SHOW_CONTEXT errors
BEGIN;
DECLARE c CURSOR FOR SELECT 1;
SET replica_gate.require_lsn = '0/1';
ROLLBACK;
-- not after other statements of the transaction, whose locks stay held
BEGIN;
SELECT 1;
SET LOCAL replica_gate.require_lsn = '0/1';
ROLLBACK;
SHOW replica_gate.require_lsn;

-- Settings.
SHOW replica_gate.default_timeout;
SHOW replica_gate.max_timeout;
SHOW replica_gate.poll_interval;
\set VERBOSITY sqlstate
SET replica_gate.default_timeout = -1;
\set VERBOSITY default
SET replica_gate.default_timeout = '2s';
SHOW replica_gate.default_timeout;
RESET replica_gate.default_timeout;
SET replica_gate.poll_interval = 5;
-- poll_interval is a server setting, 0.1 ms to 1 s
\set VERBOSITY sqlstate
ALTER SYSTEM SET replica_gate.poll_interval = 0.05;
ALTER SYSTEM SET replica_gate.poll_interval = 1001;
\set VERBOSITY default
ALTER SYSTEM SET replica_gate.poll_interval = 0.1;
ALTER SYSTEM RESET replica_gate.poll_interval;
CREATE ROLE regress_rg_plain;
SET ROLE regress_rg_plain;
SET replica_gate.max_timeout = 10;
SET replica_gate.default_timeout = 10;
SELECT replica_gate.caught_up('0/1'), replica_gate.waiters();
RESET ROLE;
DROP ROLE regress_rg_plain;

-- Nobody is waiting on this node.
SELECT replica_gate.waiters();

-- Staleness and status on a primary.
SELECT replica_gate.staleness();
SELECT replica_gate.fresh_within('0');
SELECT replica_gate.fresh_within(NULL);
SELECT pg_temp.err($$SELECT replica_gate.fresh_within(NULL, -1)$$);
SELECT replica_gate.require_fresh('1 min', 0);
SELECT pg_temp.err($$SELECT replica_gate.fresh_within('-1s')$$);
SELECT role, replay_lsn, receive_lsn, insert_lsn > '0/0' AS has_insert,
       flush_lsn <= insert_lsn AS flush_le_insert, timeline, replay_paused,
       streaming, staleness, waiters, preloaded, question
  FROM replica_gate.status();

-- 'primary' (a strong read) passes at once on a primary, in every form and
-- any letter case; primary_token() is this server's position, flushed.
SELECT replica_gate.caught_up('primary'), replica_gate.wait_for_lsn('Primary', 0),
       replica_gate.caught_up('primary', 'flush');
SELECT replica_gate.require_lsn('PRIMARY', 0);
SET replica_gate.require_lsn = 'primary';
RESET replica_gate.require_lsn;
SELECT split_part(replica_gate.primary_token(), ':', 1)::int =
         (SELECT timeline FROM replica_gate.status()) AS own_timeline,
       split_part(replica_gate.primary_token(), ':', 2)::pg_lsn
         <= pg_current_wal_flush_lsn() AS flushed;
SELECT pg_temp.err($$SELECT replica_gate.primary_token(-1)$$);

-- Statistics count every gate call.
SELECT replica_gate.stats_reset();
SELECT replica_gate.caught_up('0/1'), replica_gate.wait_for_lsn('0/1'),
       replica_gate.fresh_within('1s'), replica_gate.caught_up(NULL);
SELECT calls, immediate, waits, timeouts, errors, wait_time, max_wait_time,
       stats_reset > now() - interval '1 hour' AS recent_reset
  FROM replica_gate.stats;

-- DISCARD ALL forgets the LSN last gated on, as RESET ALL does (last:
-- it also drops this session's temporary functions).
SET replica_gate.require_lsn = '0/1';
DISCARD ALL;
SHOW replica_gate.require_lsn;
