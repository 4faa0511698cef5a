-- pgTAP: the SQL contract of replica_gate (signatures, privileges, setting
-- defaults, every error a caller can get on a primary).  Run with pg_prove in
-- a database with the pgtap and replica_gate extensions.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only true
\pset pager off

SELECT plan(121);

-- Signatures.
SELECT has_schema('replica_gate');
SELECT has_function('replica_gate', 'caught_up', ARRAY['pg_lsn', 'text']);
SELECT has_function('replica_gate', 'caught_up', ARRAY['pg_lsn']);
SELECT function_returns('replica_gate', 'caught_up', ARRAY['text'], 'boolean');
SELECT has_function('replica_gate', 'wait_for_lsn', ARRAY['pg_lsn', 'integer', 'text']);
SELECT has_function('replica_gate', 'require_lsn', ARRAY['pg_lsn', 'integer', 'text']);
SELECT has_function('replica_gate', 'waiters', ARRAY[]::text[]);
SELECT has_function('replica_gate', 'last_commit_lsn', ARRAY[]::text[]);
SELECT has_function('replica_gate', 'seen_lsn', ARRAY[]::text[]);
SELECT function_returns('replica_gate', 'last_commit_token', ARRAY[]::text[], 'text');
SELECT function_returns('replica_gate', 'seen_token', ARRAY[]::text[], 'text');
SELECT function_returns('replica_gate', 'caught_up', ARRAY['text', 'text'], 'boolean');
SELECT function_returns('replica_gate', 'wait_for_lsn', ARRAY['text', 'integer', 'text'], 'boolean');
SELECT function_returns('replica_gate', 'require_lsn', ARRAY['text', 'integer', 'text'], 'void');
SELECT function_returns('replica_gate', 'last_commit_lsn', ARRAY[]::text[], 'pg_lsn');
SELECT function_returns('replica_gate', 'seen_lsn', ARRAY[]::text[], 'pg_lsn');
SELECT function_returns('replica_gate', 'staleness', ARRAY[]::text[], 'interval');
SELECT function_returns('replica_gate', 'fresh_within', ARRAY['interval', 'integer'], 'boolean');
SELECT function_returns('replica_gate', 'require_fresh', ARRAY['interval', 'integer'], 'void');
SELECT function_returns('replica_gate', 'status', ARRAY[]::text[], 'record');
SELECT function_returns('replica_gate', 'stats_reset', ARRAY[]::text[], 'void');
SELECT function_returns('replica_gate', 'primary_token', ARRAY['integer'], 'text');
SELECT is((SELECT pg_get_function_arguments('replica_gate.primary_token(integer)'::regprocedure)),
	'timeout_ms integer DEFAULT NULL::integer', 'primary_token arguments and defaults');
SELECT function_returns('replica_gate', 'grant_lease', ARRAY['integer', 'timestamp with time zone'], 'record');
SELECT function_returns('replica_gate', 'grant_lease', ARRAY['integer'], 'record');
SELECT is((SELECT granted FROM replica_gate.grant_lease(pg_backend_pid(),
		(SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()))), false,
	'grant_lease() grants nothing to a process that is not a WAL sender');
SELECT cmp_ok((SELECT commit_clock FROM replica_gate.grant_lease(NULL, NULL)), '>', 0::bigint,
	'grant_lease() reads the clock of the commit wait');
SELECT cmp_ok((SELECT commit_clock FROM replica_gate.grant_lease(NULL)), '>', 0::bigint,
	'grant_lease(sender_pid) of 0.6.0 still answers (and grants nothing)');
SELECT function_returns('replica_gate', 'leases', ARRAY[]::text[], 'setof record');
SELECT is((SELECT count(*) FROM replica_gate.leases()), 0::bigint, 'no lease without standbys');
SELECT has_view('replica_gate', 'stats', 'view replica_gate.stats');
SELECT columns_are('replica_gate', 'stats', ARRAY['calls', 'immediate', 'waits', 'timeouts',
	'errors', 'wait_time', 'max_wait_time', 'waits_le_1ms', 'waits_le_10ms', 'waits_le_100ms',
	'waits_le_1s', 'waits_le_10s', 'waits_gt_10s', 'stats_reset', 'gave_way', 'strong_reads',
	'questions', 'questions_failed', 'question_time', 'strong_reads_local']);
SELECT is(pg_get_function_arguments('replica_gate.status()'::regprocedure),
	'OUT role text, OUT replay_lsn pg_lsn, OUT receive_lsn pg_lsn, OUT insert_lsn pg_lsn, OUT flush_lsn pg_lsn, OUT timeline integer, OUT replay_paused boolean, OUT streaming boolean, OUT staleness interval, OUT waiters integer, OUT preloaded boolean, OUT question text, OUT strong_reads boolean, OUT loaded_at_start boolean, OUT commit_wait interval',
	'status() columns');
SELECT function_returns('replica_gate', 'caught_up', ARRAY['pg_lsn', 'text'], 'boolean');
SELECT function_returns('replica_gate', 'wait_for_lsn', ARRAY['pg_lsn', 'integer', 'text'], 'boolean');
SELECT function_returns('replica_gate', 'require_lsn', ARRAY['pg_lsn', 'integer', 'text'], 'void');
SELECT function_returns('replica_gate', 'waiters', ARRAY[]::text[], 'integer');
SELECT volatility_is('replica_gate', 'caught_up', ARRAY['pg_lsn', 'text'], 'volatile');
SELECT volatility_is('replica_gate', 'wait_for_lsn', ARRAY['pg_lsn', 'integer', 'text'], 'volatile');
SELECT volatility_is('replica_gate', 'require_lsn', ARRAY['pg_lsn', 'integer', 'text'], 'volatile');
SELECT isnt_strict('replica_gate', 'caught_up', ARRAY['pg_lsn', 'text'],
	'caught_up is not strict: a NULL target means nothing to wait for');
SELECT isnt_strict('replica_gate', 'caught_up', ARRAY['pg_lsn']);
SELECT isnt_strict('replica_gate', 'caught_up', ARRAY['text']);
SELECT is(replica_gate.caught_up(NULL::pg_lsn), true, 'caught_up(pg_lsn): a NULL target passes');
SELECT is(replica_gate.caught_up(target => '0/0', mode => 'flush'), true,
	'caught_up takes its arguments by name');
SELECT isnt_strict('replica_gate', 'require_lsn', ARRAY['pg_lsn', 'integer', 'text']);
SELECT is((SELECT count(*)::int FROM pg_proc
			WHERE proname = 'caught_up' AND pronamespace = 'replica_gate'::regnamespace
			  AND pronargdefaults > 0), 0,
	'caught_up has no default arguments: a default is parsed again at every call');
SELECT is((SELECT count(*)::int FROM pg_proc
			WHERE pronamespace = 'replica_gate'::regnamespace AND pronargdefaults > 0
			  AND proname IN ('wait_for_lsn', 'require_lsn')), 0,
	'wait_for_lsn and require_lsn have no default arguments either');
SELECT is((SELECT string_agg(pg_get_function_arguments(oid), ' | ' ORDER BY pronargs, proargtypes::text)
			 FROM pg_proc WHERE proname = 'require_lsn' AND proargtypes[0] = 'text'::regtype
			   AND pronamespace = 'replica_gate'::regnamespace),
	'target text | target text, timeout_ms integer | target text, mode text | target text, timeout_ms integer, mode text',
	'require_lsn: (target), (target, timeout_ms), (target, mode), (target, timeout_ms, mode)');
SELECT is(replica_gate.wait_for_lsn('0/0', mode => 'flush'), true,
	'a named call that leaves timeout_ms out');
SELECT is(replica_gate.wait_for_lsn('0/0', timeout_ms => 10), true,
	'a named call that leaves mode out');
SELECT is(replica_gate.wait_for_lsn('0/0', NULL), true,
	'wait_for_lsn(target, NULL): the default timeout, as before');
SELECT lives_ok($$SELECT replica_gate.require_lsn('0/0'), replica_gate.require_lsn('0/0', 10),
	replica_gate.require_lsn('0/0', 10, 'replay'), replica_gate.require_lsn('0/0', 'write'),
	replica_gate.require_lsn('0/0'::pg_lsn, 'write'), replica_gate.wait_for_lsn('0/0'::pg_lsn)$$,
	'every form runs');

-- Privileges: the gates are for everyone.
SELECT schema_privs_are('replica_gate', 'public', ARRAY['USAGE']);
SELECT function_privs_are('replica_gate', 'caught_up', ARRAY['pg_lsn', 'text'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'caught_up', ARRAY['pg_lsn'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'caught_up', ARRAY['text'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'wait_for_lsn', ARRAY['pg_lsn', 'integer', 'text'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'require_lsn', ARRAY['pg_lsn', 'integer', 'text'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'waiters', ARRAY[]::text[], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'last_commit_lsn', ARRAY[]::text[], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'seen_lsn', ARRAY[]::text[], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'last_commit_token', ARRAY[]::text[], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'seen_token', ARRAY[]::text[], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'require_lsn', ARRAY['text', 'integer', 'text'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'staleness', ARRAY[]::text[], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'fresh_within', ARRAY['interval', 'integer'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'require_fresh', ARRAY['interval', 'integer'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'status', ARRAY[]::text[], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'primary_token', ARRAY['integer'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'grant_lease', ARRAY['integer'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'grant_lease', ARRAY['integer', 'timestamp with time zone'], 'public', ARRAY['EXECUTE']);
SELECT function_privs_are('replica_gate', 'leases', ARRAY[]::text[], 'public', ARRAY['EXECUTE']);
SELECT table_privs_are('replica_gate', 'stats', 'public', ARRAY['SELECT']);
SELECT function_privs_are('replica_gate', 'stats_reset', ARRAY[]::text[], 'public', ARRAY[]::text[],
	'stats_reset is not for PUBLIC');
SELECT function_privs_are('replica_gate', 'stats_reset', ARRAY[]::text[], 'pg_monitor', ARRAY[]::text[],
	'stats_reset is not for pg_monitor (superusers only, grantable)');

-- Settings and their defaults.
SELECT is(current_setting('replica_gate.default_timeout'), '1s', 'default_timeout defaults to 1s');
SELECT is(current_setting('replica_gate.max_timeout'), '1min', 'max_timeout defaults to 1min');
SELECT is(current_setting('replica_gate.poll_interval'), '500us', 'poll_interval defaults to 0.5 ms');
SELECT is(current_setting('replica_gate.require_lsn'), '', 'require_lsn starts empty');
SELECT is(current_setting('replica_gate.primary_conninfo'), '', 'primary_conninfo starts empty');
SELECT is(current_setting('replica_gate.consistency'), 'eventual', 'consistency defaults to eventual');
SELECT is(current_setting('replica_gate.read_after'), '', 'read_after starts empty');
SELECT throws_ok($$SET replica_gate.read_after = 'primary'$$, '22023',
	'invalid value for parameter "replica_gate.read_after": "primary"', 'read_after takes a token, not primary');
SELECT throws_ok($$SET replica_gate.read_after = '1:junk'$$, '22023',
	'invalid value for parameter "replica_gate.read_after": "1:junk"', 'read_after refuses a malformed token');
SELECT lives_ok($$SET replica_gate.read_after = '1:0/1'; SET replica_gate.consistency = strong; SELECT 1; RESET replica_gate.read_after; RESET replica_gate.consistency$$,
	'on a primary the session mode and the floor pass every statement');
SELECT results_eq(
	$$SELECT name, context, coalesce(unit, '') FROM pg_settings WHERE name LIKE 'replica_gate.%' ORDER BY name$$,
	$$VALUES ('replica_gate.commit_wait', 'postmaster', 'ms'),
	         ('replica_gate.consistency', 'user', ''),
	         ('replica_gate.default_timeout', 'user', 'ms'),
	         ('replica_gate.last_commit_token', 'internal', ''),
	         ('replica_gate.max_staleness', 'user', 'ms'),
	         ('replica_gate.max_timeout', 'superuser', 'ms'),
	         ('replica_gate.pay_commit_wait', 'user', ''),
	         ('replica_gate.poll_interval', 'sighup', 'ms'),
	         ('replica_gate.primary_conninfo', 'sighup', ''),
	         ('replica_gate.read_after', 'user', ''),
	         ('replica_gate.require_lsn', 'user', ''),
	         ('replica_gate.version', 'internal', '')$$,
	'settings: contexts and units');

-- Errors.
SELECT throws_ok($$SELECT replica_gate.wait_for_lsn('0/1', -1)$$,
	'22023', '"timeout_ms" must not be negative', 'negative timeout');
SELECT throws_ok($$SELECT replica_gate.require_lsn(NULL, -1)$$,
	'22023', '"timeout_ms" must not be negative', 'negative timeout with NULL target');
SELECT throws_like($$SELECT replica_gate.caught_up('FFFFFFFF/FFFFFFFF')$$,
	'target FFFFFFFF/FFFFFFFF is beyond the WAL insert position %/% of this server',
	'target beyond the primary''s WAL');
SELECT throws_ok($$SELECT replica_gate.caught_up('FFFFFFFF/FFFFFFFF')$$, '22023');
SELECT throws_ok($$SELECT replica_gate.caught_up('0/1', 'apply')$$,
	'22023', 'unrecognized value for "mode": "apply"', 'unknown wait mode');
SELECT throws_ok($$SELECT replica_gate.wait_for_lsn('0/1', 0, NULL)$$,
	'22004', '"mode" must not be null', 'NULL wait mode');
SELECT throws_ok($$SELECT replica_gate.require_lsn(NULL, 0, 'Write')$$,
	'22023', 'unrecognized value for "mode": "Write"', 'modes are case-sensitive, even with nothing to wait for');
SELECT throws_ok($$SELECT replica_gate.fresh_within('-1s')$$,
	'22023', '"max_staleness" must not be negative', 'negative staleness limit');
SELECT throws_ok($$SELECT replica_gate.caught_up('junk')$$,
	'22P02', 'invalid input syntax for a replica_gate token: "junk"', 'malformed LSN');
SELECT throws_ok($$SET replica_gate.require_lsn = 'junk'$$,
	'22P02', 'invalid input syntax for a replica_gate token: "junk"', 'malformed LSN in the SET form');
SELECT throws_ok($$SELECT set_config('replica_gate.require_lsn', '0/1', false)$$,
	'55P02', 'parameter "replica_gate.require_lsn" can only be set by a SET statement',
	'set_config cannot skip the wait');
SELECT throws_ok($$SET replica_gate.require_lsn = '0/1'$$,
	'0A000', 'SET replica_gate.require_lsn cannot wait inside a function, procedure or DO block',
	'the SET form refuses to run inside a function');
SELECT throws_ok($$SET replica_gate.max_timeout = -1$$, '22023',
	NULL, 'max_timeout cannot be negative');
SELECT throws_ok($$SET replica_gate.last_commit_token = '1:0/1'$$, '55P02',
	'parameter "replica_gate.last_commit_token" cannot be changed', 'the token cannot be set');
SELECT throws_ok($$SELECT replica_gate.caught_up('1:junk')$$, '22P02',
	'invalid input syntax for a replica_gate token: "1:junk"', 'malformed token');
SELECT throws_ok($$SELECT replica_gate.caught_up('2:FFFFFFFF/FFFFFFFF')$$, 'RG003',
	'timeline 2 of token 2:FFFFFFFF/FFFFFFFF is newer than this server''s timeline 1',
	'a primary never reaches a newer timeline');
SELECT throws_ok($$SET replica_gate.require_lsn = '0:0/1'$$, '22P02',
	'invalid input syntax for a replica_gate token: "0:0/1"', 'timeline 0 is no timeline');
SELECT throws_ok($$SET replica_gate.poll_interval = 0$$, '55P02',
	NULL, 'poll_interval is set in postgresql.conf');

CREATE ROLE regress_rg_tap_plain;
SET ROLE regress_rg_tap_plain;
SELECT throws_ok($$SET replica_gate.max_timeout = 10$$, '42501',
	'permission denied to set parameter "replica_gate.max_timeout"',
	'max_timeout is for superusers');
SELECT lives_ok($$SET replica_gate.default_timeout = 10$$, 'default_timeout is for everyone');
SELECT is(replica_gate.caught_up(pg_current_wal_insert_lsn()), true, 'a plain role can gate');
SELECT lives_ok($$SELECT replica_gate.require_lsn('0/1', 10)$$, 'and require');
SELECT throws_ok($$SELECT replica_gate.stats_reset()$$, '42501',
	'permission denied for function stats_reset', 'a plain role cannot reset the stats');
SELECT lives_ok($$SELECT * FROM replica_gate.stats, replica_gate.status()$$,
	'a plain role can read stats and status');
RESET ROLE;
DROP ROLE regress_rg_tap_plain;

BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT throws_ok($$SELECT replica_gate.caught_up('0/1')$$, '25001',
	'replica_gate.caught_up() cannot be used after the transaction snapshot was taken',
	'REPEATABLE READ: caught_up after the snapshot');
SELECT throws_ok($$SELECT replica_gate.wait_for_lsn('0/1', 0)$$, '25001',
	'replica_gate.wait_for_lsn() cannot be used after the transaction snapshot was taken',
	'REPEATABLE READ: wait_for_lsn after the snapshot');
SELECT throws_ok($$SELECT replica_gate.require_lsn('0/1', 0)$$, '25001',
	'replica_gate.require_lsn() cannot be used after the transaction snapshot was taken',
	'REPEATABLE READ: require_lsn after the snapshot');
SELECT is(replica_gate.caught_up(NULL), true, 'REPEATABLE READ: a NULL target still passes');
COMMIT;

-- Results on a primary.
SELECT is(replica_gate.wait_for_lsn(pg_current_wal_insert_lsn(), 0), true, 'primary: written LSN is caught up');
SELECT is(replica_gate.wait_for_lsn(NULL, NULL), true, 'NULL target passes');
SELECT is(replica_gate.caught_up(replica_gate.seen_token()), true, 'primary: its own read token is caught up');
SELECT is(replica_gate.caught_up('1:' || pg_current_wal_insert_lsn()), true,
	'an untyped or text target takes a token');
SELECT pg_current_wal_insert_lsn() AS target \gset
SELECT is(replica_gate.caught_up(:'target', 'flush')
		  AND pg_current_wal_flush_lsn() >= :'target', true,
	'primary: flush mode flushes the WAL up to the target');
SELECT is(replica_gate.waiters(), 0, 'nobody waits on a primary');

SELECT * FROM finish();
