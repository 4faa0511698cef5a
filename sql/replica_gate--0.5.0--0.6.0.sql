/* replica_gate 0.5.0 -> 0.6.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION replica_gate UPDATE TO '0.6.0'" to load this file. \quit

-- Leases: a paying commit waits for the standbys that hold one, not a
-- fixed time.  A standby's question grants its WAL sender a lease before it
-- reads the position; commit_clock(), which standbys of 0.5.0 read after
-- the position, with no lease, goes.
DROP FUNCTION commit_clock();

CREATE FUNCTION grant_lease(sender_pid integer,
                            OUT token text, OUT commit_clock bigint, OUT granted boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'rg_grant_lease'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION grant_lease(integer) IS
'a standby''s question, on the primary: grants the WAL sender sender_pid a lease of replica_gate.commit_wait if its standby applies promptly, then returns the primary''s position as a token and the clock of the commit wait (microseconds, CLOCK_BOOTTIME on Linux)';

CREATE FUNCTION leases(OUT sender_pid integer, OUT expires_in_ms double precision,
                       OUT applied pg_lsn, OUT behind pg_lsn)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rg_leases'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION leases() IS
'on the primary: the WAL senders granted a lease, how long until it expires (negative: expired), the apply position each last reported, and for one refused for letting a commit wait out its lease, the position it must apply first';
