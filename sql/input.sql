-- Bad input across the whole SQL surface, by a plain role: NULLs, infinite
-- and huge intervals, extreme timeouts, malformed LSNs and tokens, settings
-- out of range.  Every failure is an error with a SQLSTATE; nothing crashes.
CREATE ROLE regress_rg_input;
SET ROLE regress_rg_input;

-- Run a statement; return 'ok' or its SQLSTATE and message.
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	-- (the range in core's GUC messages is worded differently across versions)
	RETURN SQLSTATE || ': ' || left(regexp_replace(regexp_replace(SQLERRM,
		'[0-9A-F]+/[0-9A-F]+', 'X/X', 'g'), ' \(.* \.\. .*', ''), 100);
END $$;

\pset format unaligned
SELECT q || E'\n    => ' || pg_temp.try(q) AS result FROM (VALUES
	-- NULLs everywhere
	($$SELECT replica_gate.caught_up(NULL::pg_lsn)$$),
	($$SELECT replica_gate.caught_up(NULL::text, NULL)$$),
	($$SELECT replica_gate.wait_for_lsn(NULL::pg_lsn, NULL, NULL)$$),
	($$SELECT replica_gate.require_lsn(NULL::text, NULL, 'flush')$$),
	($$SELECT replica_gate.fresh_within(NULL, NULL)$$),
	($$SELECT replica_gate.require_fresh(NULL, NULL)$$),
	-- extreme timeouts
	($$SELECT replica_gate.wait_for_lsn('0/1', 2147483647)$$),
	($$SELECT replica_gate.wait_for_lsn('0/1', -2147483648)$$),
	($$SELECT replica_gate.require_fresh('1s', -1)$$),
	-- intervals: huge, negative, mixed signs
	($$SELECT replica_gate.fresh_within('100000000 years', 0)$$),
	($$SELECT replica_gate.fresh_within('-100000000 years', 0)$$),
	($$SELECT replica_gate.fresh_within('1 day -25 hours', 0)$$),
	($$SELECT replica_gate.fresh_within('1 mon -30 days', 0)$$),
	($$SELECT replica_gate.require_fresh('2147483647 days', 0)$$),
	-- LSNs and tokens
	($$SELECT replica_gate.caught_up('FFFFFFFF/FFFFFFFF'::pg_lsn)$$),
	($$SELECT replica_gate.caught_up('0/0')$$),
	($$SELECT replica_gate.caught_up('4294967295:0/1')$$),
	($$SELECT replica_gate.caught_up('1:0/1', 'replay ')$$),
	($$SELECT replica_gate.caught_up('1::0/1')$$),
	($$SELECT replica_gate.caught_up(repeat('9', 100) || ':0/1')$$),
	($$SELECT replica_gate.caught_up(repeat('x', 1000))$$),
	($$SET replica_gate.require_lsn = '1:'$$),
	($$SET replica_gate.require_lsn = '0/1', '0/2'$$),
	-- settings out of range, or not for a plain role
	($$SET replica_gate.default_timeout = -1$$),
	($$SET replica_gate.default_timeout = 2147483648$$),
	($$SET replica_gate.default_timeout = 'forever'$$),
	($$SET replica_gate.max_timeout = 0$$),
	($$SET replica_gate.poll_interval = 0.5$$),
	($$SET replica_gate.last_commit_token = '1:0/1'$$),
	($$SET replica_gate.version = '9'$$),
	($$SELECT set_config('replica_gate.require_lsn', '0/1', true)$$),
	($$SELECT replica_gate.stats_reset()$$)
) v(q);
\pset format aligned

-- Infinite intervals exist from 17 on: 'infinity' accepts any known
-- staleness, '-infinity' is negative.  (Nothing is printed on any version.)
DO $$
BEGIN
	IF current_setting('server_version_num')::int >= 170000 THEN
		IF NOT replica_gate.fresh_within('infinity'::interval, 0) THEN
			RAISE EXCEPTION 'fresh_within(infinity) failed on a primary';
		END IF;
		BEGIN
			PERFORM replica_gate.fresh_within('-infinity'::interval, 0);
			RAISE EXCEPTION 'fresh_within(-infinity) did not fail';
		EXCEPTION WHEN invalid_parameter_value THEN
			NULL;
		END;
	END IF;
END $$;

DROP FUNCTION pg_temp.try(text);
RESET ROLE;
DROP ROLE regress_rg_input;
