/*-------------------------------------------------------------------------
 *
 * proof.c
 *		What the primary's answers prove as time passes: a standby that
 *		asked the primary for its position at a moment t (its own monotonic
 *		clock) and has replayed the answer has every commit acknowledged
 *		before t, and, when the answer granted it a lease of W (lease.c),
 *		every paying commit acknowledged before t + W: the primary
 *		acknowledges none before the standby has applied it or the lease
 *		has expired.  A strong read that begins within that window needs no
 *		question of its own: the answer is its target (question.c).  Any
 *		answer whose window covers the read serves; of the newest and the
 *		one before it, the read takes the older while its window covers the
 *		read, since replay has nearly always passed its position, where a
 *		write load keeps the newest's ahead of replay.  The age of the
 *		newest replayed answer also bounds the staleness of this standby
 *		(staleness.c).  src/README.md has the argument.
 *
 * The clocks.  The window is measured on this standby's clock (rg_clock_us:
 * CLOCK_BOOTTIME on Linux, which counts suspend), the commit wait on the
 * primary's same clock: only the rates at which the two advance matter,
 * not their offset.  The window is W shortened so that rates differing by
 * up to RG_PROOF_RATE_BOUND stay safe, and the question worker checks that
 * bound: each answer carries the primary's commit clock, and between
 * answers far enough apart (at least RG_PROOF_CLOCK_SPAN_US, and for the
 * round trips to leave less than half the bound uncertain), the primary's
 * clock must have advanced at a rate within the bound of this standby's
 * (the uncertainty counted against it).  Until that has held on the
 * current connection, and whenever it fails, answers serve no window and
 * bound no staleness; the check runs again at each such span.  Each
 * answer is also compared with the last one, and with the one the check
 * compares from, however close: rates proven apart (a primary's clock that
 * advanced faster than the bound allows even at the longest this standby's
 * clock can have counted, or slower at the shortest) fail the check at
 * once.  A stop of this clock between two answers looks like that, and
 * would make the older look younger: an answer at whose arrival a stop was
 * seen never serves as the one before the newest.
 *
 * A clock that stops.  A clock stopped while the machine was paused (a
 * virtual machine's, by its hypervisor) makes an old answer look young.
 * Each read that would use an answer looks for what this standby can see
 * of that: its wall clock stepped against rg_clock_us() since the answer
 * (a clock corrected after a pause, by NTP or the hypervisor's agent; the
 * next answer looks again, so that a step between two drops both), or
 * a message its WAL receiver got from the primary sent later, on the
 * primary's wall clock, than this standby's clock allows since the
 * answer (the primary's clock did not stop).  Either drops the proof: no
 * answer serves a window, and no verdict of the clock check counts, until
 * a new answer has started a new check and it has held.  What a standby
 * cannot see, a pause of the whole machine with its clocks, ended just
 * before a read and before its WAL receiver has taken in anything the
 * primary sent since, stays an assumption (src/README.md).
 *
 * Keeping proofs fresh.  While strong reads (or bounded-staleness reads)
 * happen, the worker asks every half window on its own, so that a read
 * rarely finds no fresh answer; when none happen for RG_PROOF_DEMAND_US it
 * stops asking.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "proof.h"
#include "upstream.h"

/*
 * How far apart the rates of the two clocks may be.  Clocks drift by less
 * than 0.01 %; ntpd slews them by at most 0.05 %, chrony by up to its
 * maxslewrate (8.3 % by default) while it corrects a large offset: the
 * check then fails and strong reads ask, until the correction ends.
 */
#define RG_PROOF_RATE_BOUND		0.01

/* What a difference of two readings of a clock in us can be off by. */
#define RG_PROOF_TICK_US		2

/* A step of this standby's wall clock that drops the proofs (us). */
#define RG_PROOF_STEP_US		1000

/*
 * Clocks are compared over at least this long, and longer while the round
 * trips leave the rate more uncertain than half the bound (a distant
 * primary: 10 ms round trips need about 4 s).
 */
#define RG_PROOF_CLOCK_SPAN_US	200000

/* Reads that want a proof keep the worker asking this long. */
#define RG_PROOF_DEMAND_US		1000000

/* Readers note their demand at most this often (it is a shared write). */
#define RG_PROOF_NOTE_US		100000

/* How often answers are refreshed for bounded staleness alone. */
#define RG_PROOF_BOUNDED_US		100000

typedef struct RgProofShared
{
	slock_t		mutex;
	Latch	   *worker_latch;	/* the question worker's, NULL: none runs */
	int			commit_wait_ms; /* the primary's, -1: not connected */
	int64		window_us;		/* how long an answer covers paying commits */
	bool		clock_ok;		/* the clock check holds on this connection */
	bool		clock_reset;	/* a read saw this clock stop: check anew */
	int64		asked;			/* rg_clock_us the newest answer was asked, 0: none */
	RgTarget	answer;			/* that answer */
	RgAnswerClocks clocks;		/* what it said of the primary */
	int64		wall_offset;	/* this wall clock - rg_clock_us when it came */
	int64		prev_asked;		/* when the answer before it was asked, if it
								 * may serve (else 0) */
	RgTarget	prev_answer;	/* that answer */
	int64		demand;			/* rg_clock_us of the last read that wanted one */
} RgProofShared;

static RgProofShared *rg_proof = NULL;

/* An answer's clocks: asked and received on this one, the primary's in it. */
typedef struct RgProofClock
{
	int64		asked;			/* 0: none */
	int64		received;
	int64		primary;
} RgProofClock;

/*
 * In the worker: the answer the clock check compares from, the last answer,
 * and whether no stop of this clock was seen when the last answer came.
 */
static RgProofClock rg_proof_base;
static RgProofClock rg_proof_last;
static bool rg_proof_last_sound;

Size
rg_proof_shmem_size(void)
{
	return sizeof(RgProofShared);
}

/*
 * rg_proof_shmem_init
 *		Create or attach to the shared proof; called with AddinShmemInitLock
 *		held.
 */
void
rg_proof_shmem_init(void)
{
	bool		found;

	rg_proof = ShmemInitStruct("replica_gate proof", sizeof(RgProofShared),
							   &found);
	if (found)
		return;
	memset(rg_proof, 0, sizeof(RgProofShared));
	rg_proof->commit_wait_ms = -1;
	SpinLockInit(&rg_proof->mutex);
}

/*
 * rg_proof_attach
 *		The question worker starts (its latch) or leaves (NULL).
 */
void
rg_proof_attach(Latch *worker)
{
	SpinLockAcquire(&rg_proof->mutex);
	rg_proof->worker_latch = worker;
	SpinLockRelease(&rg_proof->mutex);
}

/*
 * rg_proof_connected
 *		In the worker: a new connection to a primary whose commits wait
 *		commit_wait_ms (0: none; -1: no connection).  Earlier answers prove
 *		nothing about it.
 */
void
rg_proof_connected(int commit_wait_ms)
{
	rg_proof_base.asked = 0;
	rg_proof_last.asked = 0;
	SpinLockAcquire(&rg_proof->mutex);
	rg_proof->commit_wait_ms = commit_wait_ms;
	rg_proof->window_us = (int64) (Max(commit_wait_ms, 0) * 1000.0 *
								   (1 - RG_PROOF_RATE_BOUND) /
								   (1 + RG_PROOF_RATE_BOUND));
	rg_proof->clock_ok = false;
	rg_proof->clock_reset = false;
	rg_proof->asked = 0;
	rg_proof->prev_asked = 0;
	SpinLockRelease(&rg_proof->mutex);
}

/*
 * rg_proof_forget
 *		In the worker: the connection closed, or the worker leaves.
 */
void
rg_proof_forget(void)
{
	if (rg_proof != NULL)
		rg_proof_connected(-1);
}

/*
 * rg_proof_commit_wait_ms
 *		The commit wait of the primary the question connection reaches, or
 *		-1 while none is connected.
 */
int
rg_proof_commit_wait_ms(void)
{
	int			ms;

	if (rg_proof == NULL)
		return -1;
	SpinLockAcquire(&rg_proof->mutex);
	ms = rg_proof->commit_wait_ms;
	SpinLockRelease(&rg_proof->mutex);
	return ms;
}

/*
 * rg_proof_rates
 *		The slowest and the fastest rate at which the primary's clock can
 *		have advanced against this one between answers "from" and "to": the
 *		primary read its clock somewhere within each round trip (each
 *		difference of readings counted as off by a tick, in the answers'
 *		favour, which matters between answers a few hundred us apart).
 *		Questions are asked one at a time, "to" after "from" came.
 */
static void
rg_proof_rates(const RgProofClock *from, const RgProofClock *to,
			   double *slowest, double *fastest)
{
	double		advanced = (double) (to->primary - from->primary);

	*slowest = (advanced - RG_PROOF_TICK_US) /
		(to->received - from->asked + RG_PROOF_TICK_US);
	*fastest = (advanced + RG_PROOF_TICK_US) /
		Max(to->asked - from->received - RG_PROOF_TICK_US, 1);
}

/*
 * rg_proof_apart
 *		Are the rates between answers "from" and "to" (rg_proof_rates, which
 *		sets *slowest and *fastest) proven apart, beyond the bound whatever
 *		the round trips hid, or did the primary's clock go back?
 */
static bool
rg_proof_apart(const RgProofClock *from, const RgProofClock *to,
			   double *slowest, double *fastest)
{
	rg_proof_rates(from, to, slowest, fastest);
	return to->primary <= from->primary ||
		*slowest > 1 + RG_PROOF_RATE_BOUND || *fastest < 1 - RG_PROOF_RATE_BOUND;
}

/*
 * rg_proof_clock_check
 *		In the worker: with answer "now", do the clocks' rates agree within
 *		the bound?  The answers compared for a verdict are at least
 *		RG_PROOF_CLOCK_SPAN_US apart; a comparison that the round trips
 *		leave too uncertain to decide either way is made again over a
 *		longer span (the last verdict stands meanwhile).  Rates proven apart,
 *		against that answer or against the last one however close, end the
 *		verdict at once, and so does a primary's clock that went back; the
 *		check then starts again from "now".  Returns whether that happened
 *		(this clock may have stopped between the last answer and "now", or
 *		the rates are apart: either way no answer is to be trusted).
 */
static bool
rg_proof_clock_check(const RgProofClock *now)
{
	RgProofClock last = rg_proof_last;
	double		slowest;
	double		fastest;
	bool		apart;
	bool		ok;

	rg_proof_last = *now;
	apart = last.asked != 0 && rg_proof_apart(&last, now, &slowest, &fastest);
	if (!apart && rg_proof_base.asked == 0)
	{
		rg_proof_base = *now;
		return false;
	}
	if (!apart)
		apart = rg_proof_apart(&rg_proof_base, now, &slowest, &fastest);
	ok = !apart &&
		slowest >= 1 - RG_PROOF_RATE_BOUND && fastest <= 1 + RG_PROOF_RATE_BOUND;
	/* too short, or neither within the bound nor out of it for certain */
	if (!apart && (now->received - rg_proof_base.asked < RG_PROOF_CLOCK_SPAN_US ||
				   (!ok && fastest - slowest > RG_PROOF_RATE_BOUND / 2)))
		return false;
	SpinLockAcquire(&rg_proof->mutex);
	/* (a read that saw this clock stop meanwhile has the last word) */
	rg_proof->clock_ok = ok && !rg_proof->clock_reset;
	SpinLockRelease(&rg_proof->mutex);
	rg_proof_base = *now;
	return apart;
}

/*
 * rg_proof_wall_offset
 *		This standby's wall clock minus rg_clock_us(), read close together
 *		(again if something ran in between): it moves only when the wall
 *		clock is stepped.
 */
int64
rg_proof_wall_offset(void)
{
	int64		before;
	int64		after;
	TimestampTz wall;

	for (int attempt = 0;; attempt++)
	{
		before = rg_clock_us();
		wall = GetCurrentTimestamp();
		after = rg_clock_us();
		if (after - before <= RG_PROOF_STEP_US / 10 || attempt == 3)
			return wall - (before + after) / 2;
	}
}

/*
 * rg_proof_answered
 *		In the worker: the question asked at "asked" (rg_clock_us, with
 *		rg_proof_wall_offset() "asked_offset" then) got "answer", received
 *		at "received", with what it said of the primary's clocks and commit
 *		wait.  After a read saw this clock stop, or if the wall clock was
 *		stepped since the last answer came (or, without one, while the
 *		question was out), the clock check starts again from this answer.
 *		The last answer may then serve as the one before the newest if no
 *		stop of this clock was seen when it came nor now (a step, a read
 *		that saw one, the clock check: rg_proof_clock_check), and it granted
 *		a lease, for paying commits, on the same timeline.
 */
void
rg_proof_answered(const RgTarget *answer, int64 asked, int64 asked_offset,
				  int64 received, const RgAnswerClocks *clocks)
{
	RgProofClock now = {asked, received, clocks->commit_clock};
	int64		wall_offset = rg_proof_wall_offset();
	int64		stepped;
	bool		reset;
	bool		stopped;

	SpinLockAcquire(&rg_proof->mutex);
	stepped = wall_offset -
		(rg_proof->asked != 0 ? rg_proof->wall_offset : asked_offset);
	reset = rg_proof->clock_reset ||
		stepped > RG_PROOF_STEP_US || stepped < -RG_PROOF_STEP_US;
	rg_proof->clock_reset = false;
	if (reset)
		rg_proof->clock_ok = false;
	SpinLockRelease(&rg_proof->mutex);
	if (reset)
		rg_proof_base.asked = 0;
	stopped = rg_proof_clock_check(&now) || reset;

	SpinLockAcquire(&rg_proof->mutex);
	/* a read saw this clock stop since: the next answer starts again */
	if (rg_proof->clock_reset)
	{
		stopped = true;
		rg_proof->clock_ok = false;
	}
	rg_proof->prev_asked = 0;
	if (!stopped && rg_proof_last_sound && rg_proof->asked != 0 &&
		rg_proof->clocks.paying && rg_proof->clocks.leased &&
		rg_proof->answer.tli == answer->tli)
	{
		rg_proof->prev_asked = rg_proof->asked;
		rg_proof->prev_answer = rg_proof->answer;
	}
	rg_proof->answer = *answer;
	rg_proof->asked = asked;
	rg_proof->clocks = *clocks;
	rg_proof->wall_offset = wall_offset;
	SpinLockRelease(&rg_proof->mutex);
	rg_proof_last_sound = !stopped;
}

/*
 * rg_proof_refresh_in
 *		In the worker: microseconds until it should ask on its own (0: now),
 *		or -1 while no read wants a proof.
 */
int64
rg_proof_refresh_in(void)
{
	int64		now = rg_clock_us();
	int64		period;
	int64		asked;
	int64		demand;

	SpinLockAcquire(&rg_proof->mutex);
	period = rg_proof->window_us > 0 ? rg_proof->window_us / 2 : RG_PROOF_BOUNDED_US;
	asked = rg_proof->asked;
	demand = rg_proof->demand;
	SpinLockRelease(&rg_proof->mutex);
	if (demand == 0 || now - demand > RG_PROOF_DEMAND_US)
		return -1;
	return Max(asked + period - now, 0);
}

/*
 * Note, now and then, that a read wants a fresh answer; mutex held.  Returns
 * the worker's latch to set once the mutex is released when no read wanted
 * one lately: the worker then sleeps, and would only notice in a second.
 */
static inline Latch *
rg_proof_note_demand(int64 now)
{
	Latch	   *wake = NULL;

	if (now - rg_proof->demand > RG_PROOF_DEMAND_US)
		wake = rg_proof->worker_latch;
	if (now - rg_proof->demand > RG_PROOF_NOTE_US)
		rg_proof->demand = now;
	return wake;
}

/*
 * rg_proof_primary_sent
 *		The send time, on the primary's wall clock, of the last message the
 *		WAL receiver got, if it streams from the primary (a standby it
 *		cascades from has a clock of its own); else 0.
 */
static TimestampTz
rg_proof_primary_sent(void)
{
	RgReceiver	rcv;
	int64		unflushed_us;

	return rg_upstream_read_primary(&rcv, &unflushed_us) ? rcv.sent_time : 0;
}

/*
 * rg_proof_still
 *		With the mutex held, for a read at "now": does the newest answer
 *		still prove anything?  Not without one, nor while the clock check
 *		does not hold, nor once this standby's clock is seen to have
 *		stopped since it came (file header): its wall clock stepped
 *		("wall_offset" moved), or the primary sent a message later than
 *		its clock can have read by now ("sent").  That ends the check's
 *		verdict until a new check has held, and sets *lost to how far
 *		behind this clock was found (us, > 0).
 */
static bool
rg_proof_still(int64 now, int64 wall_offset, TimestampTz sent, int64 *lost)
{
	int64		stepped;
	int64		ahead = 0;

	if (rg_proof->asked == 0 || !rg_proof->clock_ok)
		return false;
	stepped = wall_offset - rg_proof->wall_offset;
	if (stepped < 0)
		stepped = -stepped;
	if (sent != 0)
		ahead = sent - rg_proof->clocks.wall -
			(int64) ((now - rg_proof->asked) * (1 + RG_PROOF_RATE_BOUND));
	if (stepped <= RG_PROOF_STEP_US && ahead <= RG_PROOF_STEP_US)
		return true;
	*lost = Max(stepped, ahead);
	rg_proof->clock_ok = false;
	rg_proof->clock_reset = true;
	return false;
}

/*
 * rg_proof_read_begin
 *		A read is to look at the proof, at *now (rg_clock_us): read what
 *		shows whether this standby's clock stopped, take the mutex, and tell
 *		whether the newest answer still proves anything (rg_proof_still,
 *		which sets *lost).  rg_proof_read_end releases the mutex.
 */
static bool
rg_proof_read_begin(int64 *now, int64 *lost)
{
	TimestampTz sent = rg_proof_primary_sent();
	int64		wall_offset = rg_proof_wall_offset();

	*now = rg_clock_us();
	*lost = 0;
	SpinLockAcquire(&rg_proof->mutex);
	return rg_proof_still(*now, wall_offset, sent, lost);
}

/*
 * rg_proof_read_end
 *		After a read looked at the proof, the mutex held: note that reads
 *		want fresh answers if "want", release the mutex, wake the worker
 *		if none wanted them lately or if this clock was found stopped
 *		("lost" > 0: it is to ask at once), and say that the clock stopped,
 *		once.
 */
static void
rg_proof_read_end(bool want, int64 now, int64 lost)
{
	Latch	   *wake = want ? rg_proof_note_demand(now) : NULL;

	if (lost > 0)
		wake = rg_proof->worker_latch;
	SpinLockRelease(&rg_proof->mutex);
	if (wake != NULL)
		SetLatch(wake);
	if (lost > 0)
		ereport(LOG,
				(errmsg("replica_gate: this standby's clock stopped or was stepped since the primary's last answer"),
				 errdetail("It fell %.3f ms behind the primary's.  Strong reads ask the primary until the clocks have been checked again.",
						   lost / 1000.0),
				 errhidestmt(true)));
}

/*
 * rg_proof_use
 *		For a strong read beginning now: if the newest answer's window still
 *		covers now (the primary's commits pay the commit wait, it granted
 *		this standby a lease, the clock check held, this clock did not
 *		stop), the answer before it while its own window covers now too
 *		(its position is older, and nearly always replayed already), else
 *		the newest.
 */
bool
rg_proof_use(RgTarget *answer)
{
	int64		now;
	int64		lost;
	bool		covered;

	if (rg_proof == NULL)
		return false;
	covered = rg_proof_read_begin(&now, &lost) &&
		rg_proof->clocks.paying && rg_proof->clocks.leased &&
		now - rg_proof->asked <= rg_proof->window_us;
	if (covered && rg_proof->prev_asked != 0 &&
		now - rg_proof->prev_asked <= rg_proof->window_us)
		*answer = rg_proof->prev_answer;
	else if (covered)
		*answer = rg_proof->answer;
	/* without a commit wait, fresh answers would serve no strong read */
	rg_proof_read_end(rg_proof->window_us > 0, now, lost);
	return covered;
}

/*
 * rg_proof_age_us
 *		How long ago the newest answer was asked, if this standby at
 *		"position" on timeline "tli" has replayed it: this standby then has
 *		every commit acknowledged that long ago (a staleness bound that
 *		needs no clock but its own, while its rate is checked and it did
 *		not stop).  False if there is none, it is not replayed yet, or the
 *		clock check does not hold.  "want": a gate waits on the bound, so
 *		the worker should keep answers fresh (a monitoring call does not
 *		ask that).
 */
bool
rg_proof_age_us(XLogRecPtr position, TimeLineID tli, bool want, int64 *us)
{
	int64		now;
	int64		lost;
	bool		known;

	if (rg_proof == NULL)
		return false;
	known = rg_proof_read_begin(&now, &lost) &&
		rg_proof->answer.tli == tli && position >= rg_proof->answer.lsn;
	/* measured on this clock, whose rate may be off by the bound */
	*us = (int64) ((now - rg_proof->asked) * (1 + RG_PROOF_RATE_BOUND));
	rg_proof_read_end(want, now, lost);
	return known;
}
