/*-------------------------------------------------------------------------
 *
 * question.c
 *		Strong reads' question: where is the primary now?  A background
 *		worker on each standby keeps a connection to the primary and asks it
 *		for its position on behalf of the backends that gate on 'primary';
 *		backends that arrive together share one question.
 *
 * Sharing.  Questions are numbered.  A backend takes the number of the next
 * question not yet sent (sent + 1), raises "requested" to it, wakes the
 * worker and sleeps on a condition variable until a question of that
 * number or a later one is answered.  The worker has one question in
 * flight at a time, numbered with the highest number requested when it is
 * sent, so every backend that arrived while a question was in flight rides
 * on the next one.  An answer to a question sent before a backend arrived
 * never serves it: it can miss a commit acknowledged after that question
 * was sent but before the backend's statement began.
 *
 * The answer.  A new connection first checks the server once: one in
 * recovery (this standby cascades and replica_gate.primary_conninfo does
 * not name the primary) or of another system identifier (another cluster)
 * is refused; its replica_gate.commit_wait, which exists only where the
 * library is preloaded, says how long its answers prove this standby fresh
 * (proof.c).  It then prepares the question, replica_gate.grant_lease():
 * it grants the WAL sender streaming to this standby, named by its pid and
 * its start as upstream.c identified it, a lease (lease.c), then gives a
 * token whose position covers every commit
 * acknowledged before the question, asynchronous ones included
 * (rg_primary_position() in target.c).
 * An answer on a timeline older than the one this standby follows comes
 * from a former primary (or another server of a multi-host
 * primary_conninfo) and fails the question; a newer timeline is checked by
 * the gate, like any token's.  Each answer also carries the primary's
 * clocks, for proof.c's check of the clocks' rates and of this standby's
 * clock stopping, whether its sessions pay the commit wait by default, and
 * whether it granted the lease.  The primary learns when this standby has
 * applied a commit from its WAL receiver's replies (src/README.md,
 * "Leases").
 *
 * Without a question.  A backend first looks whether a recent answer still
 * covers its read (proof.c): then it takes that answer and asks nothing.
 *
 * The connection.  primary_conninfo's options (host, hostaddr, port, user,
 * password, TLS...), with replica_gate.primary_conninfo's laid over them,
 * and target_session_attrs=read-write where they name several hosts and no
 * target_session_attrs (libpq would settle on the first that answers);
 * the database is the one named there, else "postgres", and the extension
 * must exist in it on the primary.  It is opened at the first question,
 * again after a failure (at most every RG_QUESTION_RETRY_MS; questions
 * asked in between fail at once with the last failure), and whenever the
 * WAL receiver process or these settings change, since the primary may
 * then be another server.  The worker logs failures (the server log, never
 * a client); backends learn only the kind of failure.  Without
 * shared_preload_libraries there is no worker, and every question fails.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/walreceiver.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "proof.h"
#include "question.h"
#include "remote.h"
#include "settings.h"
#include "stats.h"
#include "target.h"
#include "upstream.h"

/* How long a connection attempt or a question may take. */
#define RG_QUESTION_TIMEOUT_MS	5000

/* After a failed connection attempt, the next one waits this long. */
#define RG_QUESTION_RETRY_MS	500

/* How often an idle worker looks whether the server left recovery. */
#define RG_QUESTION_IDLE_MS		1000

/*
 * What a new connection checks once (the server stays what it is for the
 * connection's life: a primary is not demoted without a restart), and the
 * question it prepares, then executes by name with the extended protocol:
 * the primary parses and plans nothing per question.
 */
#define RG_QUESTION_CHECK_SQL \
	"SELECT system_identifier::pg_catalog.text," \
	" (SELECT setting FROM pg_catalog.pg_settings WHERE name = 'replica_gate.commit_wait')," \
	" pg_catalog.to_regprocedure('replica_gate.grant_lease(integer,timestamp with time zone)') IS NOT NULL" \
	" FROM pg_catalog.pg_control_system() WHERE NOT pg_catalog.pg_is_in_recovery()"
#define RG_QUESTION_NAME "replica_gate_question"
/*
 * The question takes the pid and the start of the primary's WAL sender that
 * streams to this standby (NULL: unknown), and answers with the position,
 * the clock of the primary's commit wait, its wall clock, whether its
 * sessions pay the commit wait by default (a reload may change that), and
 * whether it granted that WAL sender a lease.  Where the primary's
 * extension predates grant_lease(integer, timestamptz) (0.7.0), it grants
 * none, and its wall clock stands in for the other clock: enough for the
 * staleness bound, not for serving strong reads.
 */
#define RG_QUESTION_WALL \
	"(extract(epoch FROM pg_catalog.clock_timestamp()) * 1000000)::pg_catalog.int8"
#define RG_QUESTION_PAYING \
	"pg_catalog.current_setting('replica_gate.pay_commit_wait', true)"
#define RG_QUESTION_LEASE_SQL \
	"PREPARE " RG_QUESTION_NAME "(pg_catalog.int4, pg_catalog.timestamptz) AS" \
	" SELECT l.token, l.commit_clock, " RG_QUESTION_WALL ", " RG_QUESTION_PAYING ", l.granted" \
	" FROM replica_gate.grant_lease($1, $2) l"
#define RG_QUESTION_NO_LEASE_SQL \
	"PREPARE " RG_QUESTION_NAME "(pg_catalog.int4, pg_catalog.timestamptz) AS" \
	" SELECT replica_gate.primary_token(), " \
	RG_QUESTION_WALL ", " RG_QUESTION_WALL ", " RG_QUESTION_PAYING ", false"

/* The connection's state, as status() shows it. */
typedef enum RgQuestionConn
{
	RG_CONN_NONE,				/* not opened yet */
	RG_CONN_OPEN,
	RG_CONN_FAILED				/* the last question failed */
} RgQuestionConn;

typedef struct RgQuestionShared
{
	slock_t		mutex;
	Latch	   *worker_latch;	/* NULL while no worker runs */
	uint64		requested;		/* highest question number waited for */
	uint64		sent;			/* number of the question sent last */
	uint64		answered;		/* number of the question ended last */
	bool		failed;			/* that question failed: */
	RgQuestionFailure failure;	/* why */
	RgTarget	answer;			/* else the primary's position */
	RgQuestionConn conn;
	ConditionVariable cv;		/* broadcast when a question ends */
} RgQuestionShared;

static RgQuestionShared *rg_question = NULL;
static uint32 rg_question_event = 0;
static uint32 rg_question_worker_event = 0;

/*
 * The wait event of the worker whenever it waits on the primary (on 17 and
 * later named on first use, see RG_WAIT_EVENT).
 */
#define RG_QUESTION_WORKER_EVENT \
	RG_WAIT_EVENT(rg_question_worker_event, "ReplicaGateQuestionWorker")

/* In the worker: the failure logged last, logged again only after a change. */
static int	rg_question_logged = -1;

/*
 * In the worker: its connection to the primary, what it was opened for, and
 * the last failure.
 */
static struct
{
	PGconn	   *conn;			/* NULL: not open */
	bool		prepared;		/* the question is prepared on it */
	bool		has_lease;		/* the primary has grant_lease(pid, start) */
	pid_t		receiver;		/* the WAL receiver it is opened for */
	char	   *settings;		/* primary_conninfo, replica_gate's, likewise */
	TimestampTz retry_after;	/* no new attempt before then */
	RgQuestionFailure why;		/* the last failure */
}			rg_worker = {.why = RG_QUESTION_CONNECT};

PGDLLEXPORT void rg_question_main(Datum arg);

Size
rg_question_shmem_size(void)
{
	return sizeof(RgQuestionShared);
}

/*
 * rg_question_shmem_init
 *		Create or attach to the shared question; called with
 *		AddinShmemInitLock held.
 */
void
rg_question_shmem_init(void)
{
	bool		found;

	rg_question = ShmemInitStruct("replica_gate question",
								  sizeof(RgQuestionShared), &found);
	if (found)
		return;
	memset(rg_question, 0, sizeof(RgQuestionShared));
	SpinLockInit(&rg_question->mutex);
	ConditionVariableInit(&rg_question->cv);
}

/*
 * rg_question_ask
 *		The primary's position, as learned by a question sent after this
 *		call began, or by an earlier one whose window covers it (proof.c),
 *		into *answer; waits until "deadline".  A guard (of a function-form
 *		gate) keeps the wait from holding back replay.
 */
RgAskResult
rg_question_ask(TimestampTz deadline, RgGuard *guard, RgTarget *answer,
				RgQuestionFailure *why)
{
	uint64		mine;
	Latch	   *worker;
	RgAskResult result;

	if (rg_question == NULL)
	{
		*why = RG_QUESTION_NO_WORKER;
		return RG_ASK_FAILED;
	}
	if (rg_proof_use(answer))
	{
		rg_stats_strong_read(true);
		return RG_ASK_ANSWERED;
	}

	SpinLockAcquire(&rg_question->mutex);
	mine = rg_question->sent + 1;
	if (rg_question->requested < mine)
		rg_question->requested = mine;
	worker = rg_question->worker_latch;
	SpinLockRelease(&rg_question->mutex);
	if (worker == NULL)
	{
		*why = RG_QUESTION_NO_WORKER;
		return RG_ASK_FAILED;
	}
	SetLatch(worker);
	rg_stats_strong_read(false);

	if (guard != NULL)
		rg_guard_begin(guard);
	ConditionVariablePrepareToSleep(&rg_question->cv);
	for (;;)
	{
		long		ms = (long) ((deadline - GetCurrentTimestamp() + 999) / 1000);
		long		look_ms = rg_guard_poll_ms(guard);
		bool		ended;

		SpinLockAcquire(&rg_question->mutex);
		ended = rg_question->answered >= mine;
		*answer = rg_question->answer;
		*why = rg_question->failure;
		result = rg_question->failed ? RG_ASK_FAILED : RG_ASK_ANSWERED;
		/* a worker that left does not answer */
		if (!ended && rg_question->worker_latch == NULL)
		{
			ended = true;
			*why = RG_QUESTION_NO_WORKER;
			result = RG_ASK_FAILED;
		}
		SpinLockRelease(&rg_question->mutex);
		if (ended)
			break;
		if (rg_guard_must_yield(guard))
		{
			result = RG_ASK_GAVE_WAY;
			break;
		}
		if (ms <= 0)
		{
			result = RG_ASK_TIMEOUT;
			break;
		}
		(void) ConditionVariableTimedSleep(&rg_question->cv,
										   look_ms > 0 ? Min(ms, look_ms) : ms,
										   RG_WAIT_EVENT(rg_question_event, "ReplicaGateQuestion"));
	}
	ConditionVariableCancelSleep();
	rg_guard_end(guard);
	return result;
}

/*
 * rg_question_state
 *		The question connection's state, for status(): "off" without a
 *		worker, else "not opened", "open" or "failed".
 */
const char *
rg_question_state(void)
{
	RgQuestionConn conn;
	bool		running;

	if (rg_question == NULL)
		return "off";
	SpinLockAcquire(&rg_question->mutex);
	conn = rg_question->conn;
	running = rg_question->worker_latch != NULL;
	SpinLockRelease(&rg_question->mutex);
	if (!running)
		return "off";
	return conn == RG_CONN_OPEN ? "open" : conn == RG_CONN_FAILED ? "failed" : "not opened";
}

/*
 * rg_question_end
 *		End every question sent so far: with "answer", or failed for "why"
 *		(answer NULL), and wake the backends waiting for them.
 */
static void
rg_question_end(const RgTarget *answer, RgQuestionFailure why)
{
	SpinLockAcquire(&rg_question->mutex);
	rg_question->answered = rg_question->sent;
	rg_question->failed = (answer == NULL);
	rg_question->failure = why;
	if (answer != NULL)
		rg_question->answer = *answer;
	rg_question->conn = answer != NULL ? RG_CONN_OPEN : RG_CONN_FAILED;
	SpinLockRelease(&rg_question->mutex);
	ConditionVariableBroadcast(&rg_question->cv);
}

/*
 * The worker leaves: nobody will answer what is pending.  It leaves for good
 * when the server left recovery.
 */
static void
rg_question_worker_exit(int code, Datum arg)
{
	SpinLockAcquire(&rg_question->mutex);
	rg_question->worker_latch = NULL;
	rg_question->sent = rg_question->requested;
	rg_question->conn = RG_CONN_NONE;
	SpinLockRelease(&rg_question->mutex);
	rg_upstream_attach(NULL);
	rg_proof_attach(NULL);
	rg_proof_forget();
	rg_question_end(NULL, RecoveryInProgress() ? RG_QUESTION_NO_WORKER :
					RG_QUESTION_RECOVERY_ENDED);
}

/*
 * rg_question_log_level
 *		LOG for a failure of a kind other than the one logged last, DEBUG1
 *		for the same kind again: a primary that is down for an hour is
 *		logged once, not twice a second.
 */
static int
rg_question_log_level(RgQuestionFailure why)
{
	int			level = (rg_question_logged == (int) why) ? DEBUG1 : LOG;

	rg_question_logged = (int) why;
	return level;
}

/*
 * rg_question_result
 *		The result "res" of a statement sent on the connection, if it is
 *		"status" with "columns" columns; else NULL with *why (logged).
 */
static PGresult *
rg_question_result(PGconn *conn, PGresult *res, ExecStatusType status,
				   int columns, RgQuestionFailure *why)
{
	if (res == NULL)
	{
		*why = RG_QUESTION_LOST;
		ereport(rg_question_log_level(*why),
				(errmsg("replica_gate's question to the primary got no answer: %s",
						PQstatus(conn) == CONNECTION_BAD ? pchomp(PQerrorMessage(conn)) : "timed out")));
	}
	else if (PQresultStatus(res) != status || PQnfields(res) != columns)
	{
		*why = RG_QUESTION_REFUSED;
		ereport(rg_question_log_level(*why),
				(errmsg("replica_gate's question to the primary failed: %s",
						pchomp(PQresultErrorMessage(res))),
				 errhint("The question needs CREATE EXTENSION replica_gate in the database it connects to: primary_conninfo's dbname, replica_gate.primary_conninfo's, or postgres.")));
		PQclear(res);
		res = NULL;
	}
	return res;
}

/*
 * rg_question_check_server
 *		On a new connection: is the server a primary of this cluster?  False
 *		with *why (logged) if not.
 */
static bool
rg_question_check_server(PGconn *conn, TimestampTz deadline,
						 RgQuestionFailure *why)
{
	PGresult   *res;
	char		sysid[32];
	bool		ok = false;

	res = rg_question_result(conn,
							 rg_remote_query(conn, RG_QUESTION_CHECK_SQL, deadline,
											 RG_QUESTION_WORKER_EVENT),
							 PGRES_TUPLES_OK, 3, why);
	if (res == NULL)
		return false;
	snprintf(sysid, sizeof(sysid), UINT64_FORMAT, GetSystemIdentifier());
	if (PQntuples(res) != 1)
	{
		*why = RG_QUESTION_STANDBY;
		ereport(rg_question_log_level(*why),
				(errmsg("replica_gate asked the primary for its position, but the server asked is in recovery"),
				 errhint("On a cascading standby, set replica_gate.primary_conninfo to reach the primary.")));
	}
	else if (strcmp(PQgetvalue(res, 0, 0), sysid) != 0)
	{
		*why = RG_QUESTION_OTHER_SYSTEM;
		ereport(rg_question_log_level(*why),
				(errmsg("replica_gate asked the primary for its position, but the server asked has database system identifier %s, this one %s",
						PQgetvalue(res, 0, 0), sysid)));
	}
	else
	{
		/* no such setting: the primary does not preload the library */
		int			commit_wait = PQgetisnull(res, 0, 1) ? 0 : atoi(PQgetvalue(res, 0, 1));

		rg_worker.has_lease = (strcmp(PQgetvalue(res, 0, 2), "t") == 0);
		if (commit_wait > 0 && !rg_worker.has_lease)
		{
			ereport(LOG,
					(errmsg("replica_gate on the primary predates 0.7.0's grant_lease(): strong reads on this standby ask the primary every time"),
					 errhint("Run ALTER EXTENSION replica_gate UPDATE on the primary, in the database the question connects to; it takes effect when the question connection opens again (end the primary's \"replica_gate question\" session with pg_terminate_backend(), or restart this standby).")));
			commit_wait = 0;
		}
		rg_proof_connected(commit_wait);
		ok = true;
	}
	PQclear(res);
	return ok;
}

/* Close the worker's connection, if open. */
static void
rg_question_close(void)
{
	rg_remote_finish(rg_worker.conn);
	rg_worker.conn = NULL;
	rg_worker.prepared = false;
	rg_proof_forget();
}

/* Is a connection option's value a list (of hosts)? */
static bool
rg_question_list(const char *value)
{
	return value != NULL && strchr(value, ',') != NULL;
}

/*
 * rg_question_open
 *		Make sure the worker's connection to the primary is open (see the
 *		file header): true if it is, false with rg_worker.why (logged) if it
 *		cannot be opened, or if the last attempt failed less than
 *		RG_QUESTION_RETRY_MS ago.
 */
static bool
rg_question_open(TimestampTz deadline)
{
	RgRemoteOptions options = {0};
	RgRemoteOptions over = {0};
	char	   *error;

	if (rg_worker.conn != NULL)
		return true;
	if (GetCurrentTimestamp() < rg_worker.retry_after)
		return false;			/* fail at once with the last failure */
	if (!rg_remote_add_conninfo(&options, PrimaryConnInfo) ||
		!rg_remote_add_conninfo(&over, rg_primary_conninfo))
	{
		rg_worker.why = RG_QUESTION_BAD_CONNINFO;
		ereport(rg_question_log_level(rg_worker.why),
				(errmsg("replica_gate cannot ask the primary: primary_conninfo or replica_gate.primary_conninfo cannot be parsed")));
	}
	else
	{
		/* a host or address of replica_gate's replaces both of the WAL receiver's */
		if (rg_remote_get(&over, "host") != NULL ||
			rg_remote_get(&over, "hostaddr") != NULL)
		{
			rg_remote_set(&options, "host", NULL);
			rg_remote_set(&options, "hostaddr", NULL);
		}
		for (int i = 0; i < over.n; i++)
			rg_remote_set(&options, over.keys[i], over.values[i]);
		rg_remote_set(&options, "replication", NULL);
		/* of several hosts, the primary (a single one is checked below) */
		if (rg_remote_get(&options, "target_session_attrs") == NULL &&
			(rg_question_list(rg_remote_get(&options, "host")) ||
			 rg_question_list(rg_remote_get(&options, "hostaddr"))))
			rg_remote_set(&options, "target_session_attrs", "read-write");
		if (rg_remote_get(&options, "dbname") == NULL)
			rg_remote_set(&options, "dbname", "postgres");
		rg_remote_set(&options, "application_name", "replica_gate question");
		rg_worker.conn = rg_remote_connect(&options, deadline,
										   RG_QUESTION_WORKER_EVENT,
										   &error);
		if (rg_worker.conn == NULL)
		{
			rg_worker.why = RG_QUESTION_CONNECT;
			ereport(rg_question_log_level(rg_worker.why),
					(errmsg("replica_gate could not connect to the primary: %s", error),
					 errdetail("Strong reads on this standby fail until the connection succeeds.")));
		}
		else if (!rg_question_check_server(rg_worker.conn, deadline, &rg_worker.why))
			rg_question_close();
	}
	if (rg_worker.conn == NULL)
		rg_worker.retry_after = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															RG_QUESTION_RETRY_MS);
	return rg_worker.conn != NULL;
}

/*
 * rg_question_timeline
 *		The newest timeline this standby knows of: the one it replays, or
 *		the one its WAL receiver streams.
 */
static TimeLineID
rg_question_timeline(void)
{
	TimeLineID	replayed;
	TimeLineID	received;

	(void) GetXLogReplayRecPtr(&replayed);
	SpinLockAcquire(&WalRcv->mutex);
	received = WalRcv->receivedTLI;
	SpinLockRelease(&WalRcv->mutex);
	return Max(replayed, received);
}

/*
 * rg_question_put
 *		Ask the primary on the open connection, preparing the question the
 *		first time; true with *answer and what it says of the primary's
 *		clocks, or false with rg_worker.why (logged), the connection then
 *		being unusable.
 */
static bool
rg_question_put(TimestampTz deadline, RgTarget *answer, RgAnswerClocks *clocks)
{
	RgQuestionFailure *why = &rg_worker.why;
	PGresult   *res;
	pid_t		pid;
	char		sender[16];
	char		start[RG_SENDER_START_LEN];
	const char *params[2] = {NULL, NULL};
	bool		ok = false;

	if (!rg_worker.prepared)
	{
		res = rg_question_result(rg_worker.conn,
								 rg_remote_query(rg_worker.conn,
												 rg_worker.has_lease ?
												 RG_QUESTION_LEASE_SQL :
												 RG_QUESTION_NO_LEASE_SQL,
												 deadline, RG_QUESTION_WORKER_EVENT),
								 PGRES_COMMAND_OK, 0, why);
		if (res == NULL)
			return false;
		PQclear(res);
		rg_worker.prepared = true;
	}
	if (rg_upstream_sender(&pid, start))
	{
		snprintf(sender, sizeof(sender), "%d", (int) pid);
		params[0] = sender;
		params[1] = start;
	}
	res = rg_question_result(rg_worker.conn,
							 rg_remote_execute(rg_worker.conn, RG_QUESTION_NAME,
											   2, params, deadline,
											   RG_QUESTION_WORKER_EVENT),
							 PGRES_TUPLES_OK, 5, why);
	if (res == NULL)
		return false;
	if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0) || PQgetisnull(res, 0, 1) ||
		PQgetisnull(res, 0, 2) || PQgetisnull(res, 0, 4))
	{
		*why = RG_QUESTION_REFUSED;
		ereport(rg_question_log_level(*why),
				(errmsg("replica_gate's question to the primary got no token")));
	}
	else if (!rg_target_scan(PQgetvalue(res, 0, 0), answer) ||
			 answer->primary || answer->tli == 0)
	{
		*why = RG_QUESTION_REFUSED;
		ereport(rg_question_log_level(*why),
				(errmsg("replica_gate's question to the primary got a malformed answer: \"%s\"",
						PQgetvalue(res, 0, 0))));
	}
	else if (answer->tli < rg_question_timeline())
	{
		*why = RG_QUESTION_OLD_TIMELINE;
		ereport(rg_question_log_level(*why),
				(errmsg("replica_gate asked the primary for its position, but the server asked is on timeline %u, older than this standby's %u",
						answer->tli, rg_question_timeline()),
				 errdetail("It is not the primary this standby follows: a former primary, or another server of primary_conninfo's list.")));
	}
	else
	{
		rg_question_logged = -1;
		clocks->commit_clock = (int64) strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		/* us since the Unix epoch, as a TimestampTz */
		clocks->wall = (TimestampTz) strtoll(PQgetvalue(res, 0, 2), NULL, 10) -
			(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
		clocks->paying = !PQgetisnull(res, 0, 3) &&
			strcmp(PQgetvalue(res, 0, 3), "on") == 0;
		clocks->leased = strcmp(PQgetvalue(res, 0, 4), "t") == 0;
		ok = true;
	}
	PQclear(res);
	return ok;
}

/*
 * rg_question_answer_upstream
 *		Find out whether the WAL receiver's sender, connection "key"
 *		streaming since "start", is the primary (upstream.c), on the
 *		worker's connection.
 */
static void
rg_question_answer_upstream(const RgUpstreamKey *key, XLogRecPtr start)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   RG_QUESTION_TIMEOUT_MS);
	uint32		event = RG_QUESTION_WORKER_EVENT;

	if (!rg_question_open(deadline))
		(void) rg_upstream_check(NULL, rg_worker.why == RG_QUESTION_STANDBY,
								 key, start, deadline, event);
	else if (!rg_upstream_check(rg_worker.conn, false, key, start, deadline, event))
		rg_question_close();
}

/*
 * rg_question_answer
 *		Ask the primary the question just marked sent and end it.  A
 *		connection that had served before and was found broken is
 *		reopened, and the question asked again, once.
 */
static void
rg_question_answer(void)
{
	TimestampTz start = GetCurrentTimestamp();
	RgTarget	answer;
	int64		asked = 0;
	int64		asked_offset = 0;
	RgAnswerClocks clocks;
	bool		ok = false;

	for (int attempt = 0; attempt < 2 && !ok; attempt++)
	{
		TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														   RG_QUESTION_TIMEOUT_MS);
		bool		fresh = (rg_worker.conn == NULL);

		if (!rg_question_open(deadline))
			break;
		asked_offset = rg_proof_wall_offset();
		asked = rg_clock_us();
		ok = rg_question_put(deadline, &answer, &clocks);
		if (!ok)
		{
			rg_question_close();
			if (fresh || rg_worker.why != RG_QUESTION_LOST)
				break;
		}
	}
	if (ok)
		rg_proof_answered(&answer, asked, asked_offset, rg_clock_us(), &clocks);
	rg_stats_question(ok, GetCurrentTimestamp() - start);
	rg_question_end(ok ? &answer : NULL, rg_worker.why);
}

/*
 * rg_question_main
 *		The question worker: wait for a question to be requested or for the
 *		upstream question to be wanted, answer it, publish the answer;
 *		reopen the connection as needed (file header).
 */
void
rg_question_main(Datum arg)
{
	MemoryContext loop_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "replica_gate question",
									 ALLOCSET_DEFAULT_SIZES);

	SpinLockAcquire(&rg_question->mutex);
	rg_question->worker_latch = MyLatch;
	rg_question->conn = RG_CONN_NONE;
	SpinLockRelease(&rg_question->mutex);
	rg_upstream_attach(MyLatch);
	rg_proof_attach(MyLatch);
	before_shmem_exit(rg_question_worker_exit, (Datum) 0);

	for (;;)
	{
		uint64		n;
		pid_t		receiver;
		char	   *settings;
		RgUpstreamKey key;
		XLogRecPtr	start;
		bool		upstream;
		int64		refresh_in;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(loop_cxt);
		MemoryContextSwitchTo(loop_cxt);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!RecoveryInProgress())
		{
			rg_question_close();
			proc_exit(0);		/* before_shmem_exit fails what is pending */
		}

		/* A new WAL receiver or new settings may mean another primary. */
		SpinLockAcquire(&WalRcv->mutex);
		receiver = WalRcv->pid;
		SpinLockRelease(&WalRcv->mutex);
		settings = psprintf("%s\n%s", PrimaryConnInfo ? PrimaryConnInfo : "",
							rg_primary_conninfo ? rg_primary_conninfo : "");
		if (rg_worker.settings == NULL || strcmp(settings, rg_worker.settings) != 0)
		{
			/* the answer about the sender may change with them too */
			if (rg_worker.settings != NULL)
			{
				rg_upstream_forget();
				pfree(rg_worker.settings);
			}
			rg_worker.settings = MemoryContextStrdup(TopMemoryContext, settings);
			rg_question_close();
			rg_worker.retry_after = 0;
		}
		if (receiver != 0 && receiver != rg_worker.receiver)
		{
			rg_worker.receiver = receiver;
			rg_question_close();
			rg_worker.retry_after = 0;
		}

		/* a question wanted by backends, or asked to keep proofs fresh */
		refresh_in = rg_proof_refresh_in();
		SpinLockAcquire(&rg_question->mutex);
		if (refresh_in == 0 && rg_question->requested <= rg_question->sent)
			rg_question->requested = rg_question->sent + 1;
		n = rg_question->requested > rg_question->sent ? rg_question->requested : 0;
		if (n != 0)
			rg_question->sent = n;
		SpinLockRelease(&rg_question->mutex);
		upstream = rg_upstream_wanted(&key, &start);

		if (upstream)
			rg_question_answer_upstream(&key, start);
		if (n != 0)
			rg_question_answer();
		if (n == 0 && !upstream)
		{
			int			rc;

			/* idle: notice a connection the primary closed */
			rc = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
								   (rg_worker.conn != NULL ? WL_SOCKET_READABLE : 0),
								   rg_worker.conn != NULL ? PQsocket(rg_worker.conn) : PGINVALID_SOCKET,
								   refresh_in < 0 ? RG_QUESTION_IDLE_MS :
								   Min((refresh_in + 999) / 1000, RG_QUESTION_IDLE_MS),
								   RG_QUESTION_WORKER_EVENT);
			if ((rc & WL_SOCKET_READABLE) &&
				(!PQconsumeInput(rg_worker.conn) || PQstatus(rg_worker.conn) == CONNECTION_BAD))
				rg_question_close();
		}
	}
}
