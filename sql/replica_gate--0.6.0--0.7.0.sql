/* replica_gate 0.6.0 -> 0.7.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION replica_gate UPDATE TO '0.7.0'" to load this file. \quit

-- A standby's question names the WAL sender that streams to it by its pid
-- and its start (pg_stat_activity's backend_start), as it identified it:
-- a pid alone can name, after that WAL sender exited, another standby's
-- WAL sender that the kernel gave the same pid.  grant_lease(integer), which
-- standbys of 0.6.0 call, stays and grants nothing from now on (they ask for
-- every strong read until updated).
CREATE FUNCTION grant_lease(sender_pid integer, sender_start timestamptz,
                            OUT token text, OUT commit_clock bigint, OUT granted boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'rg_grant_lease'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION grant_lease(integer, timestamptz) IS
'a standby''s question, on the primary: grants the WAL sender process sender_pid started at sender_start a lease of replica_gate.commit_wait if the caller is the standby it streams to (its role, from its host) and that standby applies promptly, then returns the primary''s position as a token and the clock of the commit wait (microseconds, CLOCK_BOOTTIME on Linux)';

COMMENT ON FUNCTION grant_lease(integer) IS
'the question of standbys whose replica_gate predates 0.7.0: the primary''s position as a token and the clock of the commit wait; grants no lease';
