/* replica_gate--0.1.0--0.2.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION replica_gate UPDATE TO '0.2.0'" to load this file. \quit

-- The LSN gates gain a wait mode: 'replay' (as before), 'write' or 'flush',
-- and overloads that take a token '<timeline>:<lsn>' as text; the tokens
-- themselves come from last_commit_token() and seen_token().
DROP FUNCTION caught_up(pg_lsn);
DROP FUNCTION wait_for_lsn(pg_lsn, integer);
DROP FUNCTION require_lsn(pg_lsn, integer);

CREATE FUNCTION caught_up(target pg_lsn, mode text DEFAULT 'replay')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(pg_lsn, text) IS
'true when this server has replayed (standby; or written, flushed: see mode) or written (primary) the target LSN; NULL target: true';

CREATE FUNCTION wait_for_lsn(target pg_lsn, timeout_ms integer DEFAULT NULL,
							 mode text DEFAULT 'replay')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION wait_for_lsn(pg_lsn, integer, text) IS
'wait until caught_up(target, mode), at most timeout_ms (NULL: replica_gate.default_timeout); false on timeout';

CREATE FUNCTION require_lsn(target pg_lsn, timeout_ms integer DEFAULT NULL,
							mode text DEFAULT 'replay')
RETURNS void
AS 'MODULE_PATHNAME', 'rg_require_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION require_lsn(pg_lsn, integer, text) IS
'wait like wait_for_lsn, but raise SQLSTATE RG001 on timeout';

CREATE FUNCTION caught_up(target text, mode text DEFAULT 'replay')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(text, text) IS
'caught_up for a token ''<timeline>:<lsn>'' (checked against this server''s timeline history: SQLSTATE RG002 if the write was lost in a failover) or a plain LSN given as text';

CREATE FUNCTION wait_for_lsn(target text, timeout_ms integer DEFAULT NULL,
							 mode text DEFAULT 'replay')
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION wait_for_lsn(text, integer, text) IS
'wait_for_lsn for a token or a plain LSN given as text';

CREATE FUNCTION require_lsn(target text, timeout_ms integer DEFAULT NULL,
							mode text DEFAULT 'replay')
RETURNS void
AS 'MODULE_PATHNAME', 'rg_require_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION require_lsn(text, integer, text) IS
'require_lsn for a token or a plain LSN given as text';

COMMENT ON FUNCTION last_commit_lsn() IS
'end of the commit record of this session''s last write transaction (the write token as a plain, timeline-blind LSN); NULL before the first';

COMMENT ON FUNCTION seen_lsn() IS
'an LSN covering everything this session''s reads on this node could have seen (the read token as a plain, timeline-blind LSN)';

CREATE FUNCTION last_commit_token()
RETURNS text
AS 'MODULE_PATHNAME', 'rg_last_commit_token'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION last_commit_token() IS
'the write token ''<timeline>:<lsn>'': timeline and end of the commit record of this session''s last write transaction; NULL before the first';

CREATE FUNCTION seen_token()
RETURNS text
AS 'MODULE_PATHNAME', 'rg_seen_token'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION seen_token() IS
'the read token ''<timeline>:<lsn>'': covers everything this session''s reads on this node could have seen';

-- status() gains the column preloaded.
DROP FUNCTION status();
CREATE FUNCTION status(
	OUT role text,
	OUT replay_lsn pg_lsn,
	OUT receive_lsn pg_lsn,
	OUT insert_lsn pg_lsn,
	OUT flush_lsn pg_lsn,
	OUT timeline integer,
	OUT replay_paused boolean,
	OUT streaming boolean,
	OUT staleness interval,
	OUT waiters integer,
	OUT preloaded boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'rg_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION status() IS
'what this node can serve, in one row: role, WAL positions, timeline, replay and receiver state, staleness bound, waiting gates, whether the library is preloaded here';

-- Resetting the statistics is for superusers, as core's resets are (grant
-- EXECUTE to let another role do it); pg_monitor only reads.
REVOKE EXECUTE ON FUNCTION stats_reset() FROM pg_monitor;

COMMENT ON FUNCTION stats_reset() IS
'zero the counters of replica_gate.stats (superusers, and roles granted EXECUTE)';
