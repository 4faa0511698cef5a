/* replica_gate--0.3.0--0.4.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION replica_gate UPDATE TO '0.4.0'" to load this file. \quit

-- Strong reads: the primary's position as a token.  A standby's question
-- worker calls it on the primary.
CREATE FUNCTION primary_token(timeout_ms integer DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'rg_primary_token'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION primary_token(integer) IS
'the primary''s position as a token ''<timeline>:<lsn>'', covering every commit acknowledged before the call: on a primary its own (flushed), on a standby asked of the primary within timeout_ms (SQLSTATE RG001 if it cannot be)';

-- status() shows the question connection, whether this node serves strong
-- reads, whether this session loaded the library at its start and the
-- primary's commit wait; stats() counts strong reads (those served without a
-- question too) and questions.  New columns come last, so that a new library fills the old
-- rows too.
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
	OUT preloaded boolean,
	OUT question text,
	OUT strong_reads boolean,
	OUT loaded_at_start boolean,
	OUT commit_wait interval)
RETURNS record
AS 'MODULE_PATHNAME', 'rg_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION status() IS
'what this node can serve, in one row: role, WAL positions, timeline, replay and receiver state, staleness bound, waiting gates, whether the library is preloaded here, the state of the connection that asks the primary (standby), whether strong reads are served here, whether this session loaded the library at its start (only then do settings given at connection gate its first statements), the primary''s commit wait (strong reads served without a question; on a standby as learned from the primary, NULL if not connected)';

DROP VIEW stats;
DROP FUNCTION stats();

CREATE FUNCTION stats(
	OUT calls bigint,
	OUT immediate bigint,
	OUT waits bigint,
	OUT timeouts bigint,
	OUT errors bigint,
	OUT wait_time double precision,
	OUT max_wait_time double precision,
	OUT waits_le_1ms bigint,
	OUT waits_le_10ms bigint,
	OUT waits_le_100ms bigint,
	OUT waits_le_1s bigint,
	OUT waits_le_10s bigint,
	OUT waits_gt_10s bigint,
	OUT stats_reset timestamptz,
	OUT gave_way bigint,
	OUT strong_reads bigint,
	OUT questions bigint,
	OUT questions_failed bigint,
	OUT question_time double precision,
	OUT strong_reads_local bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'rg_stats_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW stats AS SELECT * FROM stats();
GRANT SELECT ON stats TO PUBLIC;

COMMENT ON VIEW stats IS
'cumulative gate statistics of this server since the last stats_reset() (needs shared_preload_libraries)';

-- caught_up takes its mode as a second argument of its own instead of a
-- default: PostgreSQL reads a default back from the catalog and parses it
-- at every call, in the parser and again in the planner, which cost a
-- passing check a fifth of its instructions.  Both forms call the same C
-- function, which takes a missing mode as 'replay'.
DROP FUNCTION caught_up(pg_lsn, text);
DROP FUNCTION caught_up(text, text);

CREATE FUNCTION caught_up(target pg_lsn)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(pg_lsn) IS
'true when this server has replayed (standby) or written (primary) the target LSN; NULL target: true';

CREATE FUNCTION caught_up(target pg_lsn, mode text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(pg_lsn, text) IS
'caught_up(target) in a wait mode: replay, write or flush (standby)';

CREATE FUNCTION caught_up(target text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(text) IS
'caught_up for a token ''<timeline>:<lsn>'' (checked against this server''s timeline history: SQLSTATE RG002 if the write was lost in a failover), a plain LSN given as text, or ''primary''';

CREATE FUNCTION caught_up(target text, mode text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rg_caught_up_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION caught_up(text, text) IS
'caught_up(target) for a token, a plain LSN given as text or ''primary'', in a wait mode: replay, write or flush (standby)';

-- wait_for_lsn and require_lsn likewise lose their default arguments: each
-- takes (target), (target, timeout_ms), (target, timeout_ms, mode) and
-- (target, mode), so that positional calls and named ones that leave an
-- argument out (mode => 'flush') work as before without a default to parse.
-- In the (target, mode) form a NULL second argument means the default
-- timeout, as wait_for_lsn(target, NULL) did.
DROP FUNCTION wait_for_lsn(pg_lsn, integer, text);
DROP FUNCTION wait_for_lsn(text, integer, text);
DROP FUNCTION require_lsn(pg_lsn, integer, text);
DROP FUNCTION require_lsn(text, integer, text);

CREATE FUNCTION wait_for_lsn(target pg_lsn)
RETURNS boolean AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION wait_for_lsn(target pg_lsn, timeout_ms integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION wait_for_lsn(target pg_lsn, timeout_ms integer, mode text)
RETURNS boolean AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION wait_for_lsn(target pg_lsn, mode text)
RETURNS boolean AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_mode'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION wait_for_lsn(pg_lsn) IS
'wait until caught_up(target), at most replica_gate.default_timeout; false on timeout';
COMMENT ON FUNCTION wait_for_lsn(pg_lsn, integer) IS
'wait until caught_up(target), at most timeout_ms (NULL: replica_gate.default_timeout); false on timeout';
COMMENT ON FUNCTION wait_for_lsn(pg_lsn, integer, text) IS
'wait until caught_up(target, mode), at most timeout_ms (NULL: replica_gate.default_timeout); false on timeout';
COMMENT ON FUNCTION wait_for_lsn(pg_lsn, text) IS
'wait until caught_up(target, mode), at most replica_gate.default_timeout; false on timeout';

CREATE FUNCTION wait_for_lsn(target text)
RETURNS boolean AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION wait_for_lsn(target text, timeout_ms integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION wait_for_lsn(target text, timeout_ms integer, mode text)
RETURNS boolean AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION wait_for_lsn(target text, mode text)
RETURNS boolean AS 'MODULE_PATHNAME', 'rg_wait_for_lsn_text_mode'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION wait_for_lsn(text) IS
'wait_for_lsn for a token, a plain LSN given as text, or ''primary''';
COMMENT ON FUNCTION wait_for_lsn(text, integer) IS
'wait_for_lsn for a token, a plain LSN given as text, or ''primary'', at most timeout_ms';
COMMENT ON FUNCTION wait_for_lsn(text, integer, text) IS
'wait_for_lsn for a token, a plain LSN given as text, or ''primary'', at most timeout_ms, in a wait mode';
COMMENT ON FUNCTION wait_for_lsn(text, text) IS
'wait_for_lsn for a token, a plain LSN given as text, or ''primary'', in a wait mode';

CREATE FUNCTION require_lsn(target pg_lsn)
RETURNS void AS 'MODULE_PATHNAME', 'rg_require_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION require_lsn(target pg_lsn, timeout_ms integer)
RETURNS void AS 'MODULE_PATHNAME', 'rg_require_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION require_lsn(target pg_lsn, timeout_ms integer, mode text)
RETURNS void AS 'MODULE_PATHNAME', 'rg_require_lsn_sql'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION require_lsn(target pg_lsn, mode text)
RETURNS void AS 'MODULE_PATHNAME', 'rg_require_lsn_mode'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION require_lsn(pg_lsn) IS
'wait like wait_for_lsn, but raise SQLSTATE RG001 on timeout';
COMMENT ON FUNCTION require_lsn(pg_lsn, integer) IS
'wait like wait_for_lsn, but raise SQLSTATE RG001 on timeout';
COMMENT ON FUNCTION require_lsn(pg_lsn, integer, text) IS
'wait like wait_for_lsn, but raise SQLSTATE RG001 on timeout';
COMMENT ON FUNCTION require_lsn(pg_lsn, text) IS
'wait like wait_for_lsn, but raise SQLSTATE RG001 on timeout';

CREATE FUNCTION require_lsn(target text)
RETURNS void AS 'MODULE_PATHNAME', 'rg_require_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION require_lsn(target text, timeout_ms integer)
RETURNS void AS 'MODULE_PATHNAME', 'rg_require_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION require_lsn(target text, timeout_ms integer, mode text)
RETURNS void AS 'MODULE_PATHNAME', 'rg_require_lsn_text'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION require_lsn(target text, mode text)
RETURNS void AS 'MODULE_PATHNAME', 'rg_require_lsn_text_mode'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION require_lsn(text) IS
'require_lsn for a token, a plain LSN given as text, or ''primary''';
COMMENT ON FUNCTION require_lsn(text, integer) IS
'require_lsn for a token, a plain LSN given as text, or ''primary''';
COMMENT ON FUNCTION require_lsn(text, integer, text) IS
'require_lsn for a token, a plain LSN given as text, or ''primary''';
COMMENT ON FUNCTION require_lsn(text, text) IS
'require_lsn for a token, a plain LSN given as text, or ''primary''';
