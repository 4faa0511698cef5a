/*
 * leases.pml: the lease-and-proof protocol of replica_gate, for SPIN.
 *
 * What a strong read served without a question relies on (src/README.md,
 * "Strong reads without a round trip"; src/lease.c, src/commit_wait.c,
 * src/proof.c, src/question.c), as processes that interleave freely:
 *
 *   Tick     the clock (below)
 *   Net      WAL sender slots: a sender exits (x1) and a new one takes the
 *            free slot (x2), for S1 again or for another client, with a
 *            pid reused or not; S1 replays, or pauses; grants asked by
 *            anyone but S1's question worker (another standby's question
 *            worker, the owner of an archiver's connection, any role that
 *            may call grant_lease())
 *            S1's WAL receiver gets a message (q0's confirmation)
 *   Worker   S1's question worker: it identifies S1's WAL sender (q0),
 *            and asks grant_lease() for the WAL sender it identified (q1,
 *            then g1..g4 on the primary); q2 keeps the answer
 *   Reader   strong reads on S1 (s1..s3)
 *   Writer   one paying commit each (c1..c7, or abandoned while it waits)
 *   PRead    a strong read on the primary (p1..p4)
 *   Restart  a primary restart or a lossless switchover: the lease table
 *            is lost
 *
 * THE INVARIANT, asserted when a strong read takes its snapshot (s3 on S1,
 * p1 on the primary): it sees every commit acknowledged (c6) before the
 * read began, and every commit that a strong read on the primary saw, if
 * that read ended before this one began.  "must" is the largest position
 * of those commits: a standby replays in order, so seeing the commit at
 * "must" is seeing all of them.
 *
 * ONE READING STANDBY.  S1 is the standby whose reads are checked.  "S2"
 * is any other client of a WAL sender: another standby, or an archiver
 * (pg_receivewal).  Reads on S2 need no reader of their own: S2's question
 * worker touches the shared state only at g2 (its answers are its own),
 * which Net's grant by another client does, with any outcome; so a
 * violation on S2 would be, with the names swapped, one on S1 here.
 *
 * ONE IDENTITY.  S1 and S2 connect as the same role from the same host
 * (the same replication user on one machine, as CI's standbys do): g1's
 * check of role and host passes for the senders of both, and tells them
 * apart no more than it tells S1's old sender from a new process given
 * its pid.  What names S1's sender is S1's question: the pid and the
 * start (backend_start) of the WAL sender process its question worker
 * identified (upstream.c; q0 below), maybe exited since.  And S2's
 * senders may look like S1's to the identification (the same
 * application_name, host, start point and timeline).  (Standbys of
 * distinct roles or hosts are a special case: g1 refuses more.)
 *
 * One file serves the fixed protocol, each broken variant (-D<VARIANT>,
 * below) and each scenario's bounds (-DW=.. -DNC=.. ...): test/model/check
 * compiles them all, and test/model/README.md says what each variant
 * breaks and the counterexample it produces.
 *
 * Labels: the steps carry the names src/README.md's argument cites (q0,
 * its confirmation q0c, q1, g1, g2, g4, q2, s1, s3, c1..c7, x1, x2,
 * p1..p4; g3 is the step boundary between g2 and g4, s2 is folded into
 * s1..s3); each prints a line starting with "@", which check keeps when
 * it replays a counterexample ("@tick": the clock advances).
 */

/* ------------------------------------------------------------------ */
/* Bounds                                                              */
/* ------------------------------------------------------------------ */

/*
 * TIME.  One global discrete clock, advanced by Tick, read by the primary
 * (leases, the commit wait W, primary_since) and by S1 (its answers'
 * windows W').  S1's real clock may run up to 1 % off the primary's: its
 * window W' = W (1 - 0.01) / (1 + 0.01), measured on its clock, ends in
 * true time before W has passed on the primary's clock.  That is the only
 * property of the two rates the argument uses (src/README.md, case 2), and
 * W' = W - 1 on one clock keeps exactly that: a read served at b with an
 * answer asked at t has b <= t + W - 1 < g + W, the expiry of the lease
 * recorded at g >= t.  The offset between the clocks does not matter
 * (only differences of one clock's readings are compared), so one clock
 * loses nothing.  Events within a tick are ordered by the interleaving,
 * so "before" stays exact within a tick; every test of the protocol
 * compares a difference of readings with W or W', which whole ticks
 * represent exactly.
 *
 * Every moment is kept relative to now: a lease's ticks left, a commit's
 * age since it became visible, an answer's age, and so on, each capped
 * where the protocol stops telling values apart (an age of W or more is
 * "W has passed").  The state does not hold the clock, and time is
 * unbounded: Tick may always advance it, any number of times.
 */
#ifndef W
#define W	3
#endif
#ifdef NO_RATE_MARGIN
#define WP	W				/* broken: the window is W, not shortened */
#else
#define WP	(W - 1)			/* W', S1's window */
#endif
#ifndef NC
#define NC	1				/* paying commits, one writer session each: 1 or 2 */
#endif
#ifndef NSLOT
#define NSLOT	2			/* WAL sender slots (max_wal_senders): 1 or 2 */
#endif
#ifndef NPID
#define NPID	3			/* pids 1..NPID, few, so that they are reused: 2 or 3 */
#endif
#ifndef EXITS
#define EXITS	1			/* WAL sender exits (x1) in a run */
#endif
#ifndef RESTARTS
#define RESTARTS	0		/* primary restarts or switchovers: 0 or 1 */
#endif
#ifndef PREADS
#define PREADS	1			/* strong reads on the primary: 0 or 1 */
#endif
#ifndef OTHER_GRANTS
#define OTHER_GRANTS	1	/* grants asked by anyone but S1's worker: 0, 1
							 * (for S2's senders) or 2 (for any) */
#endif

#if NC < 1 || NC > 2 || NSLOT < 1 || NSLOT > 2 || NPID < 2 || NPID > 3 || W < 2
#error "bounds out of the model's range: NC 1..2, NSLOT 1..2, NPID 2..3, W >= 2"
#endif

#define MAX(a, b)	((a) > (b) -> (a) : (b))
#define MIN(a, b)	((a) < (b) -> (a) : (b))

/* ------------------------------------------------------------------ */
/* Variants                                                            */
/* ------------------------------------------------------------------ */
/*
 * ERASE            the main before issue 50's fix: no identity check at
 *                  g1 (a grant for any streaming WAL sender), g2 erases
 *                  the live lease of another pid, x1 retires nothing (so
 *                  no gone lease)
 * NO_EXIT_RETIRE   the fixed g2, but x1 leaves the lease under its pid
 * NO_FIRST_W       c5, p3, p4 ignore primary_since
 * NO_PRIMARY_WAIT  p2..p4 skipped: a strong read on the primary never waits
 * NO_BARRIER       g4 reads the position before g2's record is seen
 * NO_RATE_MARGIN   S1's window is W, not W' < W
 * SPLIT_GRANT      g1 (the identity check) and g2 (the record) in two
 *                  critical sections: a sender can exit between them
 * SPLIT_APPLY      c5 and p4 read a slot's lease, then, in another
 *                  critical section, its WAL sender's pid and apply
 * RETIRE_FIRST     x1 retires the lease before the identity entry goes
 * ASKER_BINDING    the lease.c of dafc0d7: the question names its WAL
 *                  sender by pid only; the session (the question
 *                  connection on the primary, opened again with each WAL
 *                  receiver or after a failure) obtains no lease for a pid
 *                  whose start differs from the one it last obtained a
 *                  lease for, under that pid; the first question of a
 *                  session is not bound
 * NO_ASKER_BINDING the question names its WAL sender by pid only, and no
 *                  session binding either
 * MISIDENTIFY      no confirmation: the sender q0 identifies is named by
 *                  S1's questions at once, without waiting for a message
 *                  sent after asked_at (and so q0 may look while S1's
 *                  WAL receiver connection is broken, unnoticed)
 * EARLY_LOOK       q0 may look before S1's WAL sender streams for S1's
 *                  current connection (its START_REPLICATION not yet
 *                  shown): that live sender is then no match
 * STALE_LOOK       the lease waker judges a waiting commit on a look
 *                  taken before the commit linked (here: before c2)
 *
 * Not variants, but how a run is shaped:
 * Q1_APART         q1 reads S1's clock in a step of its own before g1,
 *                  instead of at g1 (see Worker)
 * FRESH_PIDS       no pid is reused
 * SLOT1_FREE       with two slots, slot 1 starts free (so that one exit
 *                  lets a pid move to another slot)
 * BOUND_FIRST      (with ASKER_BINDING or NO_ASKER_BINDING) the run
 *                  starts with S1's session bound to sender 1: it has
 *                  obtained a lease for it before
 * NO_REOPEN        (with ASKER_BINDING or NO_ASKER_BINDING) S1's question
 *                  session never ends: no failure, no new WAL receiver
 */
#ifdef ERASE
#define NO_EXIT_RETIRE
#endif
/* the question names its WAL sender by pid only (no start) */
#if defined(ERASE) || defined(ASKER_BINDING) || defined(NO_ASKER_BINDING)
#define BY_PID
#endif
/* the session's binding is kept (NO_ASKER_BINDING: for the story only) */
#if defined(ASKER_BINDING) || defined(NO_ASKER_BINDING)
#define BINDING
#endif

/* ------------------------------------------------------------------ */
/* Shared state                                                        */
/* ------------------------------------------------------------------ */

/*
 * THE WAL.  Commits are numbered in insert order: a commit's position is
 * the number of commit records inserted up to and including it, and "ins"
 * is the insert position.  Only commit records are modelled: other records
 * move positions but no wait depends on them, and "replay >= lsn" means
 * the same whatever lies between.  Flush and send are immediate: S1 may
 * replay anything inserted (replay <= ins), in order, one commit at a
 * time, or pause (Net just does not take its step).  That lets S1 apply
 * sooner than it could have received, which only adds runs.  A restart or
 * switchover is lossless: the WAL goes on from the same position, and
 * every commit inserted is durable and visible on the (new) primary (its
 * record was flushed before it became visible).
 */
byte ins = 0;
byte vis = 0;				/* bit lsn-1: commit lsn is visible on the primary */
byte must = 0;				/* the invariant's bound (header) */
byte replay = 0;			/* S1's replay position */

/*
 * WAL SENDER SLOTS (WalSndCtl->walsnds[i]) and the identity table of live
 * physical WAL senders (pid -> client).  A slot is free (spid 0) or holds
 * a sender streaming to S1 (s2 == 0) or to another client (s2 == 1), whose
 * identity entry (sup) x2 creates and x1 removes.  A run starts with S1's
 * sender (pid 1) in slot 0 and, with two slots, S2's (pid 2) in slot 1;
 * EXITS bounds how many senders exit, and new ones take the free slots,
 * any number of them.
 *
 * REPORTS.  The apply position a sender of S1 reports is S1's replay, at
 * once; a sender of S2 reports the insert position, as if S2 had applied
 * everything, at once (REP).  Real reports come later and are smaller;
 * every rule that reads one releases a commit when it is large enough
 * ("apply >= lsn"), so reports at once and as large as can be only
 * release more, sooner: a superset of the runs.  (An archiver reports 0,
 * and S2's reads are S1's mirror image: neither needs S2's replay.)
 */
byte exits = EXITS;
byte spid[NSLOT];
bit s2[NSLOT];
byte sup[NSLOT];			/* 1: its identity entry is there (x1 not begun);
							 * 2: RETIRE_FIRST's exit, entry still there */
#define REP(i)	(s2[i] -> ins : replay)
#ifdef FRESH_PIDS
#if NSLOT > 1 && !defined(SLOT1_FREE)
byte lastpid = 2;			/* the pids given so far */
#else
byte lastpid = 1;
#endif
#endif

/*
 * S1'S IDENTIFICATION, ITS BELIEF AND ITS SESSION'S BINDING (upstream.c,
 * question.c, lease.c).
 *
 * S1's WAL receiver connection is bound to the WAL sender it connected to:
 * "cs" is 1 + that sender's slot, 0 once that sender has begun to exit
 * (its identity entry gone): the connection is broken, S1 may not have
 * noticed, and no message comes on it any more.  x2 for S1 is S1's WAL
 * receiver connecting anew: a new connection (a new key), whose
 * identification starts over.
 *
 * q0, the identification (rg_upstream_check()): one query on the primary
 * lists the physical WAL senders that match S1's current connection
 * (application_name, address, start point, timeline), and, if exactly one
 * does, returns its pid and start (backend_start, from the same row) and
 * the primary's clock, asked_at, read after the look; it also writes a
 * WAL record of no effect, so that a message follows.  Which live senders
 * (identity entry there) match: S1's current one, in the fixed model,
 * always (the rule: the look comes once that sender streams for this
 * connection; EARLY_LOOK: maybe not, its START_REPLICATION not yet
 * shown); any other (S2's, or an older sender of S1's that the primary
 * has not yet found dead) may match or not, chosen afresh at each look
 * (their attributes do not change: choosing afresh only adds runs).
 * The one match becomes "bel", pending (idst 1).  q0c, the confirmation
 * (rg_upstream_sender()): S1's WAL receiver gets, on that connection, a
 * message its sender sent after asked_at; only a connection not broken
 * gets one, and only from the sender it is bound to.  Then idst 2: S1's
 * questions name bel, pid and start, from then on.  Until then they name
 * nobody, and obtain no lease: the model's Worker does not ask.
 *
 * Exact abridgements.  The look and asked_at are one step (asked_at is
 * read after the look: a message sent after it is sent after the look,
 * and the model confirms with any message after the look, a superset).
 * q0 looks only while the connection is not broken (not MISIDENTIFY): a
 * look that no message can confirm only leaves S1 naming nobody until it
 * connects anew, which the Worker's not asking is.  q0 never identifies
 * again the process already identified: that only delays questions.  In
 * the fixed model S1's new sender streams from x2 on: the look, which the
 * rule keeps after its START_REPLICATION, may then come any time after x2
 * (sooner: more runs; nothing else depends on when it began to stream).
 * EARLY_LOOK makes its START_REPLICATION a step of its own ("cst"), and
 * lets the look come before it.
 *
 * In the fixed model, then, q0 identifies only S1's current sender (it
 * matches, and with another match there are two); MISIDENTIFY and
 * EARLY_LOOK are the two ways it can identify another standby's.
 *
 * That sender may since have exited, and the kernel given its pid to
 * another process, before S1's WAL receiver noticed.  The fixed rule: the
 * question names the pid and the start of that sender's process, and g1
 * refuses a start that is not the identity entry's.  A start is unique
 * with its pid, so the question names one process: once it has exited (x1
 * removes its entry), g1 refuses the belief whatever process has its pid,
 * forever.  So the model drops the belief then (bel = 0: g1 finds
 * nothing), which merges states and is exact.
 *
 * BY_PID (ERASE, ASKER_BINDING, NO_ASKER_BINDING): the question names the
 * pid only, and a stale "bel" stays until S1 connects anew.
 * BINDING (ASKER_BINDING; NO_ASKER_BINDING keeps it but checks nothing,
 * for its story): the session's binding, the (pid, start) it last
 * obtained a lease for (dafc0d7's rg_lease_asker_pid and _serial):
 * "bpid", 0 none, and "bok", whether that process is still the one with
 * the pid (x1 clears it; a start is unique with its pid, so it never
 * matches again).
 */
byte bel = 1;				/* the pid S1's questions name, 0 none */
byte idst = 2;				/* 0 none identified, 1 q0 done, 2 confirmed */
byte cs = 1;				/* S1's connection: 1 + its sender's slot, 0 broken */
#ifdef EARLY_LOOK
bit cst = 1;				/* its sender streams for it (START_REPLICATION) */
#endif
#ifdef BINDING
byte bpid = 0;
bit bok = 0;
#endif

/*
 * THE LEASE TABLE (shared memory of the primary, lease.c): per slot the
 * current lease {pid, expires} and the gone lease {expires, applied}, each
 * expiry kept as the ticks left until it (0: expired, or none; an expired
 * lease is, for every rule, the same as none: each tests "expires > now",
 * or releases on "now >= expires").  A rule's "expires <= v" (the lease
 * expired before the commit became visible) implies "now >= expires", so
 * it needs no clock of its own.
 */
byte cpid[NSLOT];
byte crem[NSLOT];			/* current lease: ticks left */
byte grem[NSLOT];			/* gone lease: ticks left */
byte gapp[NSLOT];			/* gone lease: applied */
byte lrem = 0;				/* last_expiry: ticks left */
byte paying = 0;			/* paying commits not yet released or abandoned */
byte arem = 0;				/* abandoned_until: ticks left */
byte epoch = 0;				/* restarts so far: a dead primary's backends stop */

/*
 * Ages, each 0 for "none", else 1 + the ticks since, capped at 1 + W (W
 * or more have passed; for a question 1 + W' + 1: its answer can serve no
 * read).  The run starts on a primary whose first W is over (its first
 * paying commit came long ago); a restart starts it again.
 */
byte psage = W + 1;			/* primary_since */
byte vage[NC];				/* each commit's v (it became visible) */
byte page = 0;				/* the strong read on the primary's t */
byte qage = 0;				/* t of S1's question in flight */
#define AGED(a)	((a) == W + 1)	/* W has passed since */

#ifdef NO_FIRST_W
#define FIRST_W_OVER	true
#else
#define FIRST_W_OVER	AGED(psage)	/* now >= primary_since + W */
#endif

/*
 * The writers are alike: any run is, with the writers renamed, one where
 * writer 0 inserts first.  So writer k > 0 inserts only once writer k - 1
 * has inserted or died: a symmetry reduction, exact.  winsd[k]: 0 not
 * begun, 1 begun, 2 inserted or dead.
 */
byte winsd[NC];

/*
 * S1'S ANSWERS.  ans[j] is 1 + the smallest position of the answers that
 * granted a lease and were asked j ticks ago (0: none), for j = 0..W':
 * every answer whose window still covers now.  Tick ages them, and drops
 * the ones whose window is over.  The code keeps the newest answer and the
 * one before it (proof.c), and a read takes one of them; here a read may
 * take any answer whose window covers it, a superset (the argument proves
 * every such answer), so the answer before the newest is covered, and the
 * time an answer takes to arrive does not matter: it is kept from g4 on,
 * as if it arrived at once, which only lets reads take it sooner.  An
 * answer that granted no lease serves no read: it is not kept (the code
 * then takes neither answer, and asks).
 */
byte ans[WP + 1];

/* ------------------------------------------------------------------ */
/* Steps shared by several processes                                   */
/* ------------------------------------------------------------------ */

/* F(0); F(1): F, an inline of one slot, for each slot */
#if NSLOT > 1
#define EACH_SLOT(F)	F(0); F(1)
#else
#define EACH_SLOT(F)	F(0)
#endif

/*
 * Retire slot I's current lease into its gone lease, with applied A (x1,
 * and g2 when the slot's lease names another pid).  Only a live lease
 * moves; the gone lease keeps the later expiry and the smaller applied
 * position of the two.
 */
inline retire(I, A)
{
	if
	:: cpid[I] != 0 && crem[I] > 0 ->
		if
		:: grem[I] > 0 ->
			grem[I] = MAX(grem[I], crem[I]);
			gapp[I] = MIN(gapp[I], A)
		:: else ->
			grem[I] = crem[I];
			gapp[I] = A
		fi
	:: else
	fi;
	cpid[I] = 0;
	crem[I] = 0
}

/*
 * g2: record a lease for pid P in slot I.  GR: granted.  The primary
 * refuses standbys that do not keep up (lease.c); safety must not depend
 * on that, so every grant may be refused: it then names the pid (as the
 * code's bookkeeping does) and extends nothing.
 */
inline record(I, P, GR)
{
	if
	:: cpid[I] != P ->
#ifdef ERASE
		if
		:: cpid[I] != 0 && crem[I] > 0 ->
			printf("@    the live lease of sender %d (%d ticks left) in slot %d is erased\n",
			       cpid[I], crem[I], I)
		:: else
		fi;
		crem[I] = 0;
#else
		if
		:: cpid[I] != 0 && crem[I] > 0 ->
			printf("@    the live lease of sender %d (%d ticks left) becomes slot %d's gone lease, applied 0 (unknown)\n",
			       cpid[I], crem[I], I)
		:: else
		fi;
		retire(I, 0);			/* applied unknown */
#endif
		cpid[I] = P
	:: else
	fi;
	if
	:: GR ->
		crem[I] = W;			/* max(expires, now + W) */
		lrem = W				/* max(last_expiry, expires) */
	:: else
	fi;
	/* a lease that is not live is none, whichever pid it names */
	if :: crem[I] == 0 -> cpid[I] = 0 :: else fi
}

/* what a grant did, for the trail */
inline show_grant(GR, I)
{
	if
	:: GR -> printf("@ g2:    granted: slot %d's lease is sender %d's, %d ticks left\n", I, cpid[I], crem[I])
	:: !GR && crem[I] > 0 -> printf("@ g2:    refused: slot %d's lease is sender %d's, %d ticks left\n", I, cpid[I], crem[I])
	:: !GR && crem[I] == 0 -> printf("@ g2:    refused: slot %d has no live lease\n", I)
	fi
}

/*
 * g1's identity check (rg_lease_asked_by_standby()): is slot i's WAL
 * sender pid P (walsnd->pid, read with the table's mutex held), and has P
 * a live identity entry (x1 has not removed it) with the caller's role
 * and host?  S1 and S2 share role and host (header): the entry of any
 * sender passes, whichever client it streams to.  The main before issue
 * 50 (ERASE) looks only for a streaming WAL sender with that pid.  The
 * start and the session's binding are the Worker's (g1).
 */
#ifdef ERASE
#define NAMES(i, P)	(spid[i] == (P) && (P) != 0)
#else
#define NAMES(i, P)	(spid[i] == (P) && (P) != 0 && sup[i] != 0)
#endif

/*
 * x1 removes slot I's sender's identity entry: the start S1's question
 * names, or its session's binding, no longer matches any process; S1's
 * WAL receiver connection, if bound to that sender, is broken.
 */
inline entry_gone(I)
{
#ifndef BY_PID
	if
	:: bel == spid[I] ->
		bel = 0; idst = 0;
		printf("@ x1:    the sender S1's question names (pid and start) is gone\n")
	:: else
	fi;
#endif
	if
	:: cs == I + 1 ->
		cs = 0;
		printf("@ x1:    S1's WAL receiver connection is broken (S1 has not noticed)\n")
	:: else
	fi;
#ifdef BINDING
	if :: bpid == spid[I] -> bok = 0 :: else fi;
#endif
	skip
}

#if NSLOT > 1
#define FREEPID(p)	(spid[0] != (p) && spid[1] != (p))
#else
#define FREEPID(p)	(spid[0] != (p))
#endif

/* the newest visible commit (a snapshot on the primary sees up to it) */
#define MAXVIS	((vis & 2) -> 2 : ((vis & 1) -> 1 : 0))

/*
 * c5 and p4: one slot's part of a poll of the release condition of a
 * commit ending at LSN.  The code takes the lease table's spinlock for
 * the slot, and then (SPLIT_APPLY) the WAL sender's spinlock for its pid
 * and apply; the fixed rule reads both in one critical section.  Falls
 * through when the slot lets the commit go, else jumps to the caller's
 * label "pollfail" (it polls again).  The code reads its clock once per
 * poll; each step here reads the clock afresh, later, and every test of
 * the clock is "now >= expires": a superset of the code's releases.
 *
 * apply_check: the sender's part, on "need", the pid of the slot's live
 * lease (0: none): slot I's sender must be that pid and report apply
 * >= LSN.
 */
inline apply_check(I, LSN)
{
	if
	:: need != 0 && !(spid[I] == need && REP(I) >= LSN) -> goto pollfail
	:: need != 0 && spid[I] == need && REP(I) >= LSN ->
#ifndef SPLIT_APPLY
		printf("@    poll: slot %d's lease is sender %d's, live; sender %d (of S%d) there reports apply %d\n",
		       I, need, spid[I], s2[I] + 1, REP(I));
#else
		printf("@    poll: sender %d in slot %d (now of S%d) reports apply %d\n",
		       spid[I], I, s2[I] + 1, REP(I));
#endif
		need = 0
	:: need == 0
	fi
}

inline slot_check(I, LSN)
{
	atomic {
		if
		:: grem[I] > 0 && gapp[I] < LSN -> goto pollfail
		:: grem[I] > 0 && gapp[I] >= LSN ->
			printf("@    poll: slot %d's gone lease (%d ticks left) has applied %d\n",
			       I, grem[I], gapp[I])
		:: grem[I] == 0
		fi;
		if
		:: cpid[I] != 0 && crem[I] > 0 -> need = cpid[I]
		:: else -> need = 0
		fi;
#ifndef SPLIT_APPLY
		apply_check(I, LSN)
	}
#else
		if
		:: need != 0 ->
			printf("@    poll: slot %d's lease is sender %d's, live\n", I, need)
		:: else
		fi
	}
	/* the sender's pid and apply, in a critical section of their own */
	atomic { apply_check(I, LSN) }
#endif
}

/* c5 and p4: a poll of every slot (see slot_check) */
inline poll_slots(LSN)
{
	slot_check(0, LSN);
#if NSLOT > 1
	slot_check(1, LSN)
#endif
}

/* x1's retire of the exiting sender's lease in slot I (Net's p: scratch) */
inline exit_retire(I)
{
#ifndef NO_EXIT_RETIRE
	if
	:: cpid[I] == spid[I] && crem[I] > 0 ->
		p = REP(I);
		printf("@ x1:    its live lease (%d ticks left) becomes slot %d's gone lease, applied %d\n",
		       crem[I], I, p);
		retire(I, p);
		p = 0
	:: else
	fi
#else
	if
	:: cpid[I] == spid[I] && crem[I] > 0 ->
		printf("@ x1:    its live lease (%d ticks left) stays in slot %d under pid %d\n",
		       crem[I], I, cpid[I])
	:: else
	fi
#endif
}

#define OLDER(a, cap)	if :: (a) > 0 && (a) < (cap) -> a++ :: else fi

/* a tick: slot I's leases run out; an expired lease is no lease */
inline leases_age(I)
{
	if :: crem[I] > 0 -> crem[I]--; if :: crem[I] == 0 -> cpid[I] = 0 :: else fi :: else fi;
	if :: grem[I] > 0 -> grem[I]--; if :: grem[I] == 0 -> gapp[I] = 0 :: else fi :: else fi
}

/* a restart: slot I's sender and leases are lost */
inline slot_lost(I)
{
	spid[I] = 0; s2[I] = 0; sup[I] = 0;
	cpid[I] = 0; crem[I] = 0; grem[I] = 0; gapp[I] = 0
}

/* ------------------------------------------------------------------ */
/* Processes                                                           */
/* ------------------------------------------------------------------ */

proctype Tick()
{
	byte j;
	do
	:: atomic {
		printf("@tick\n");
		EACH_SLOT(leases_age);
		if :: lrem > 0 -> lrem-- :: else fi;
		if :: arem > 0 -> arem-- :: else fi;
		OLDER(psage, W + 1);
		j = 0;
		do
		:: j < NC -> OLDER(vage[j], W + 1); j++
		:: else -> break
		od;
		OLDER(page, W + 1);
		OLDER(qage, WP + 2);
		/* S1's answers age; the oldest window is over */
		j = WP;
		do
		:: j > 0 -> ans[j] = ans[j - 1]; j--
		:: else -> break
		od;
		ans[0] = 0
	   }
	od
}

/*
 * WAL senders, S1's replay, and grants asked by anyone but S1's question
 * worker.
 */
proctype Net()
{
	byte i, p;
	bit c;
	do
	/*
	 * x1: a WAL sender exits, in the sender, before it frees its slot:
	 * first its identity entry goes (from then on g1 does not find it),
	 * then its lease is retired; then the slot is free.  (Between the
	 * retire and the freeing of walsnd->pid no lease names the sender
	 * and g1 does not find it, so nothing looks at the slot: the two are
	 * one step here.)  rg_lease_sender_exit() removes the entry and
	 * retires in one critical section: the model also lets steps come
	 * between the two, more runs.  RETIRE_FIRST: the other order.
	 */
	:: atomic {
		if
		:: exits > 0 && sup[0] == 1 -> i = 0
#if NSLOT > 1
		:: exits > 0 && sup[1] == 1 -> i = 1
#endif
		fi;
		exits--;
#ifndef RETIRE_FIRST
		sup[i] = 0;
x1:		printf("@ x1: sender %d (of S%d) in slot %d exits: its identity entry goes\n",
		       spid[i], s2[i] + 1, i);
		entry_gone(i);
#else
		sup[i] = 2;
		printf("@ x1: sender %d (of S%d) in slot %d exits\n", spid[i], s2[i] + 1, i);
		exit_retire(i);
#endif
		i = 0
	   }
	:: atomic {
		if
		:: spid[0] != 0 && sup[0] != 1 -> i = 0
#if NSLOT > 1
		:: spid[1] != 0 && sup[1] != 1 -> i = 1
#endif
		fi;
#ifndef RETIRE_FIRST
		exit_retire(i);
#else
		printf("@ x1:    sender %d's identity entry goes\n", spid[i]);
		entry_gone(i);
#endif
		printf("@ x1:    slot %d is free\n", i);
		spid[i] = 0; s2[i] = 0; sup[i] = 0;
		i = 0
	   }
	/*
	 * x2: a new WAL sender takes the first free slot (as PostgreSQL's
	 * InitWalSenderSlot does), with any pid no live sender has: pids are
	 * reused.  Its client: S1 (reconnecting) or another.
	 */
	:: atomic {
		if
		:: spid[0] == 0 -> i = 0
#if NSLOT > 1
		:: spid[0] != 0 && spid[1] == 0 -> i = 1
#endif
		fi;
#ifdef FRESH_PIDS
		lastpid++;
		p = lastpid;
#else
		if
		:: FREEPID(1) -> p = 1
		:: FREEPID(2) -> p = 2
#if NPID > 2
		:: FREEPID(3) -> p = 3
#endif
		fi;
#endif
		if :: c = 1 :: c = 0 fi;
		spid[i] = p; s2[i] = c; sup[i] = 1;
		/*
		 * S1's WAL receiver connects anew, to this sender: a new
		 * connection, for which S1 has identified no sender yet (q0)
		 */
		if :: c == 0 -> cs = i + 1; bel = 0; idst = 0 :: else fi;
#ifdef EARLY_LOOK
		if :: c == 0 -> cst = 0 :: else fi;
#endif
x2:		if
		:: c == 0 -> printf("@ x2: sender %d for S1 takes slot %d: S1's WAL receiver connects anew (nothing identified for it yet)\n", p, i)
		:: else -> printf("@ x2: sender %d for S2 takes slot %d\n", p, i)
		fi;
		i = 0; p = 0; c = 0
	   }
	/*
	 * q0c: S1's WAL receiver gets a message its sender sent after q0's
	 * asked_at (a connection not broken: its sender is live)
	 */
#ifdef EARLY_LOOK
	/* S1's WAL receiver sends START_REPLICATION: its sender streams */
	:: atomic {
		cs != 0 && !cst -> cst = 1;
		printf("@ x2:    S1's sender %d in slot %d streams for S1's connection: its START_REPLICATION is shown\n",
		       spid[cs - 1], cs - 1)
	   }
#define STREAMS	cst
#else
#define STREAMS	true
#endif
	:: atomic {
		idst == 1 && cs != 0 && STREAMS ->
		idst = 2;
q0c:	printf("@ q0c: S1's WAL receiver gets a message that sender %d sent after asked_at: S1's questions name sender %d (pid and start) from now on\n",
		       spid[cs - 1], bel)
	   }
	/* S1 replays; paused, it just does not take this step */
	:: atomic {
		replay < ins -> replay++;
		printf("@ S1 replays commit %d\n", replay)
	   }
#if OTHER_GRANTS
#if OTHER_GRANTS > 1
#define ONAMES(I)	NAMES(I, spid[I])
#else
#define ONAMES(I)	(NAMES(I, spid[I]) && s2[I] == 1)
#endif
	/*
	 * A grant asked by someone other than S1's question worker, for a
	 * sender it passes g1 with (before issue 50, ERASE: any streaming
	 * sender).  OTHER_GRANTS 2: any sender with a live identity entry,
	 * S2's or S1's, since S2 has S1's role and host (S2's start or
	 * binding only refuses more).  OTHER_GRANTS 1: S2's senders only.  A
	 * grant to one of S1's senders by someone else only makes commits wait
	 * longer (it records a lease for S1's sender, or extends it, which x1
	 * retires with S1's apply; no rule releases a commit sooner for a
	 * lease that is later or that exists), so the scenarios that leave
	 * it out lose no violation; the slot scenario checks that with it.
	 * g1 and g2 in one step; its answer serves S1 nothing.
	 */
	:: atomic {
		if
		:: ONAMES(0) -> i = 0
#if NSLOT > 1
		:: ONAMES(1) -> i = 1
#endif
		fi;
		p = spid[i];
		if :: c = 1 :: c = 0 fi;
		printf("@ g2: S2 (or anyone who may) asks for a lease for sender %d (of S%d) in slot %d\n",
		       p, s2[i] + 1, i);
		record(i, p, c);
		show_grant(c, i);
		i = 0; p = 0; c = 0
	   }
#endif
	od
}

/*
 * q0 (see S1's identification): slot I's sender is listed (live), and can
 * be the only match: no other listed sender must match, that is, no other
 * is the sender of S1's current connection (EARLY_LOOK: unless that one
 * does not stream yet, cst); and it is not the process identified
 * already.
 */
#define LISTED(I)	(spid[I] != 0 && sup[I] != 0)
#ifdef EARLY_LOOK
#define OTHER_OK(J)	!(LISTED(J) && cs == (J) + 1 && cst)
#else
#define OTHER_OK(J)	!(LISTED(J) && cs == (J) + 1)
#endif
#if NSLOT > 1
#define ALONE(I, J)	(LISTED(I) && OTHER_OK(J) && !(bel == spid[I] && idst != 0))
#else
#define ALONE(I, J)	(LISTED(I) && !(bel == spid[I] && idst != 0))
#endif
#ifdef MISIDENTIFY
#define CAN_LOOK	true
#else
#define CAN_LOOK	(cs != 0)
#endif

/*
 * g1's part that is the question's: the start it names is still the
 * identity entry's (fixed: S1's belief is live), or (ASKER_BINDING) the
 * session did not obtain a lease for another process of that pid.
 */
#if defined(ASKER_BINDING)
#define ASKER_OK(P)	(bpid != (P) || bok)
#elif defined(BY_PID)
#define ASKER_OK(P)	true
#else
#define ASKER_OK(P)	(bel == (P))
#endif

/*
 * S1's question worker (question.c, proof.c, upstream.c).  q0: it
 * identifies S1's WAL sender (see S1's identification).  q1: it reads its
 * clock t and asks grant_lease(p, start), p being the WAL sender it
 * identified, once confirmed (q0c), maybe exited since; with no sender
 * identified and confirmed, the question names nobody, grant_lease()
 * grants nothing, and the answer serves nothing: not modelled.  g1..g4
 * run in a backend of the primary, in S1's question session; a restart of
 * the primary before g4 kills it (no answer).  q2: S1 keeps the answer
 * (see S1's answers).  ASKER_BINDING: the session may end (a failure, a
 * new WAL receiver) and S1 open another, bound to nothing.
 *
 * Unless Q1_APART, q1 reads the clock at g1: the question's moment t is
 * then as late as it can be, and every read that an earlier t serves
 * (b - t <= W') is served with this t too.  With Q1_APART, g1 checks the
 * start named at q1 as "bel == p": a new sender of S1's taking p between
 * them passes too (more runs), and one taking another pid makes g1 refuse
 * where the code grants the old sender, which is the run with x2 after g1
 * (the two steps commute).
 */
proctype Worker()
{
	byte p, i, P, e, j;
	bit gr;
	do
	:: atomic {
		if
		:: CAN_LOOK && ALONE(0, 1) -> i = 0
#if NSLOT > 1
		:: CAN_LOOK && ALONE(1, 0) -> i = 1
#endif
		fi;
		bel = spid[i];
#ifdef MISIDENTIFY
		idst = 2;
#else
		idst = 1;
#endif
q0:		printf("@ q0: S1's question worker looks on the primary: sender %d (of S%d) in slot %d is the one WAL sender that matches S1's connection; asked_at = now\n",
		       bel, s2[i] + 1, i);
#if NSLOT > 1 && defined(EARLY_LOOK)
		/* (S1's current sender matches unless EARLY_LOOK) */
		if
		:: cs != 0 && cs != i + 1 ->
			printf("@ q0:    S1's sender %d in slot %d, live, is no match (its START_REPLICATION not shown yet)\n",
			       spid[cs - 1], cs - 1)
		:: else
		fi;
#endif
		if
		:: idst == 2 -> printf("@ q0:    S1's questions name sender %d (pid and start) from now on\n", bel)
		:: else
		fi;
		i = 0
	   }
#if defined(BINDING) && !defined(NO_REOPEN)
	:: atomic {
		bpid != 0 -> bpid = 0; bok = 0;
		printf("@ S1's question connection opens again: a new session, bound to nothing\n")
	   }
#endif
	:: atomic {
		bel != 0 && idst == 2 ->
		e = epoch;
		p = bel;
		qage = 1;
q1:		printf("@ q1: S1 asks for a lease for sender %d\n", p);
#ifdef Q1_APART
	   };
	atomic {
		if :: epoch != e -> goto dead :: else fi;
#endif
#ifdef NO_BARRIER
		/* g4 first: the position read before the record is seen */
		P = ins;
		printf("@ g4: (too early) the primary's insert position is %d\n", P)
	   };
	atomic {
		if :: epoch != e -> goto dead :: else fi;
#endif
g1:		if
		:: NAMES(0, p) && ASKER_OK(p) -> i = 0
#if NSLOT > 1
		:: NAMES(1, p) && ASKER_OK(p) -> i = 1
#endif
		:: else -> i = NSLOT
		fi;
#ifdef BINDING
		if
		:: i < NSLOT && bpid == p && !bok ->
			printf("@ g1:    this session obtained its last lease for another process with pid %d: not checked\n", p)
		:: i < NSLOT && bpid != p ->
			printf("@ g1:    sender %d's identity entry has the caller's role and host; this session obtained no lease for pid %d before\n", p, p)
		:: else
		fi;
		if :: i < NSLOT -> bpid = p; bok = 1 :: else fi;
#endif
#ifdef SPLIT_GRANT
		printf("@ g1: sender %d may have a lease (slot %d)\n", p, i)
	   };
	atomic {
		if :: epoch != e -> goto dead :: else fi;
#endif
g2:		if
		:: i < NSLOT ->
			if :: gr = 1 :: gr = 0 fi;
			record(i, p, gr);
			show_grant(gr, i)
		:: else ->
			gr = 0;
			printf("@ g1: refused: sender %d is not the one named, or gone: no lease\n", p)
		fi;
		p = 0; i = 0;
		/* an answer that granted no lease serves nothing: done */
		if :: !gr -> goto dead :: else fi
	   };
	/* g3: a full barrier; then g4 reads the position */
	atomic {
		if :: epoch != e -> goto dead :: else fi;
#ifndef NO_BARRIER
g4:		P = ins;
#endif
q2:		printf("@ q2: S1 has the answer asked %d ticks ago: position %d, a lease\n",
		       qage - 1, P);
		/*
		 * Positions only grow from answer to answer, so an answer
		 * asked earlier has a position no larger.  Kept: the first
		 * answer of each age, and none older with the same position
		 * (the younger one serves every read the older would, and
		 * longer): this only merges states.
		 */
		if
		:: qage <= WP + 1 && ans[qage - 1] == 0 ->
			ans[qage - 1] = P + 1;
			j = qage;
			do
			:: j <= WP ->
				if :: ans[j] == P + 1 -> ans[j] = 0 :: else fi;
				j++
			:: else -> break
			od;
			j = 0
		:: else
		fi;
		qage = 0; P = 0; e = 0; gr = 0
	};
	goto next;
dead:
	atomic { qage = 0; p = 0; i = 0; P = 0; e = 0; gr = 0 };
next:
	skip
	od
}

/*
 * Strong reads on S1, s1..s3 in one step.  s1: the read begins (it must
 * see up to "must" now); it takes an answer whose window covers now, else
 * it asks: the position of a question asked after it began, at least the
 * insert position now, which it takes here (the least it can be: a read
 * that asks is safe).  Of the answers it may take, the one with the
 * smallest position is the worst: it takes that one.  s2: it waits until
 * replay reaches the target; s3: its snapshot sees every commit up to
 * replay.  Replay only grows and may pause anywhere, so some run takes the
 * snapshot at exactly max(replay now, target); the snapshot can miss a
 * commit it must see iff that is below "must", which the assertion checks
 * at s1: the same as checking every s3.
 */
proctype Reader()
{
	byte j, k, tgt;
	do
	:: atomic {
		tgt = 0;
		j = 0;
		do
		:: j <= WP ->
			if
			:: ans[j] != 0 && (tgt == 0 || ans[j] <= tgt) -> tgt = ans[j]; k = j
			:: else
			fi;
			j++
		:: else -> break
		od;
		if
		:: tgt != 0 ->
			tgt--;
s1:			printf("@ s1: a strong read on S1 begins (it must see up to %d): it takes the answer asked %d ticks ago, position %d\n",
			       must, k, tgt)
		:: else ->
			tgt = ins;			/* it asks */
			printf("@ s1: a strong read on S1 begins (it must see up to %d): it asks, position %d\n",
			       must, tgt)
		fi;
s3:		printf("@ s3: S1 has replayed up to %d and pauses there: the snapshot sees up to %d\n",
		       MAX(tgt, replay), MAX(tgt, replay));
		assert(replay >= must || tgt >= must);
		j = 0; k = 0; tgt = 0
	   }
	od
}

/*
 * One paying commit by a writer session on the primary.  A restart kills
 * it wherever it is (unless): never acknowledged; inserted, it stays.
 * fw: the first W of the lease table had passed at v (c5 tests
 * "v >= primary_since + W"; primary_since does not move while the
 * writer lives, so that is known at c4).
 */
proctype Writer(byte id)
{
	byte e, lsn, need;
	bit fw;
#ifdef STALE_LOOK
	bit nolease;			/* the waker's look, before c2: no live lease */
#endif
	atomic {
		e = epoch;
#ifdef STALE_LOOK
		nolease = (lrem == 0);
		printf("@ c1: the lease waker looks at the lease table: %d ticks of leases left\n", lrem);
#endif
c1:		paying++;
		winsd[id] = 1;
		printf("@ c1: a paying commit begins\n")
	};
	{
		atomic {
			(id == 0 || winsd[id - 1] == 2) ->
c2:			ins++; lsn = ins;
			winsd[id] = 2;
			printf("@ c2: its record is inserted at position %d\n", lsn)
		};
		atomic {
			skip;
c3:
#if PREADS
			vis = vis | (1 << (lsn - 1));
#endif
			printf("@ c3: commit %d is visible\n", lsn)
		};
		atomic {
			skip;
c4:			vage[id] = 1;		/* v = now */
			if :: psage == 0 -> psage = 1 :: else fi;
			fw = FIRST_W_OVER
		};
c5:		do
		:: atomic {
			AGED(vage[id]) ->
			printf("@ c5: commit %d has waited W\n", lsn);
			break
		   }
#if PREADS
		:: atomic {
			/*
			 * the session is terminated while it waits (without strong
			 * reads on the primary, that is only a commit that is never
			 * acknowledged: no run needs it)
			 */
			arem = MAX(arem, W + 1 - vage[id]); paying--; vage[id] = 0;
			printf("@ c5: commit %d is abandoned (its session terminated): abandoned_until in %d ticks\n",
			       lsn, arem);
			goto wdone
		   }
#endif
		:: atomic {
#ifdef STALE_LOOK
			!AGED(vage[id]) && fw && nolease ->
			printf("@ c5: commit %d: judged on the waker's look, taken before it was inserted: no live lease\n", lsn);
#else
			!AGED(vage[id]) && fw && lrem == 0 ->
			printf("@ c5: commit %d: no live lease (last_expiry passed)\n", lsn);
#endif
			break
		   }
		:: atomic { !AGED(vage[id]) && fw && lrem > 0 -> skip };
			poll_slots(lsn);
			atomic {
				printf("@ c5: commit %d is released by its leases\n", lsn);
				break
			}
pollfail:	need = 0
		od;
		atomic {
			vage[id] = 0;
c6:			must = MAX(must, lsn);
			printf("@ c6: commit %d is acknowledged\n", lsn)
		};
c7:		paying--
	} unless { epoch != e };
wdone:
	atomic { e = 0; lsn = 0; need = 0; fw = 0 }
}

/*
 * A strong read on the primary.  p1: its snapshot (it sees the visible
 * commits); p2: a full barrier, t, primary_since; p3: nothing to wait for,
 * or L; p4: it waits as a commit at L visible at t would.  When it ends,
 * what it saw counts.  A restart kills it (it never ends).  p3 tests
 * "abandoned_until <= t" as "abandoned_until <= now" (now >= t), which
 * ends more reads at p3: a superset.
 */
proctype PRead()
{
	byte e, mv, L, need;
	bit fw;
	atomic {
#if !RESTARTS
		/*
		 * A strong read on the primary that sees no commit ends with no
		 * effect but primary_since, which only a restart makes matter:
		 * without restarts, the read comes once a commit is visible.
		 */
		vis != 0 ->
#endif
		e = epoch;
p1:		mv = MAXVIS;
		printf("@ p1: a strong read on the primary takes its snapshot: it sees up to commit %d\n", mv);
		/* it sees every commit acknowledged or seen before: visible */
		assert(must == 0 || (vis >> (must - 1)) & 1)
	};
	{
#ifndef NO_PRIMARY_WAIT
		atomic {
			skip;
p2:			page = 1;			/* t = now */
			if :: psage == 0 -> psage = 1 :: else fi;
			fw = FIRST_W_OVER
		};
		atomic {
			skip;
p3:			if
			:: paying == 0 && arem == 0 && fw ->
				printf("@ p3: no paying commit pending: nothing to wait for\n");
				goto pend
			:: else ->
				L = ins;
				printf("@ p3: it waits as a commit at %d would\n", L)
			fi
		};
p4:		do
		:: atomic { AGED(page) -> break }
		:: atomic { !AGED(page) && fw && lrem == 0 -> break }
		:: atomic { !AGED(page) && fw && lrem > 0 -> skip };
			poll_slots(L);
			break;
pollfail:	need = 0
		od;
#endif
		atomic {
			skip;
pend:		must = MAX(must, mv);
			page = 0;
			printf("@ p4: the strong read on the primary ends\n")
		}
	} unless { epoch != e };
	atomic { e = 0; mv = 0; L = 0; need = 0; fw = 0 }
}

/*
 * A primary restart, or a lossless switchover to a promoted standby: the
 * lease table, the identity table, paying, abandoned_until, primary_since
 * are lost, every WAL sender is gone, waiting writers never acknowledge,
 * what was inserted is visible.  S1 keeps its answers (their windows still
 * run) and its WAL senders connect again (x2).  (The promoted standby
 * stops being a standby; keeping S2 one only adds runs.)
 */
proctype Restart()
{
	byte j;
	atomic {
		epoch++;
		EACH_SLOT(slot_lost);
		paying = 0; arem = 0; psage = 0; lrem = 0;
		/* every identity entry is gone, every connection, every session */
		cs = 0;
#ifndef BY_PID
		bel = 0; idst = 0;
#endif
#ifdef BINDING
		bpid = 0; bok = 0;
#endif
		j = 0;
		do
		:: j < NC ->
			vage[j] = 0;
			if :: winsd[j] == 1 -> winsd[j] = 2 :: else fi;	/* dead */
			j++
		:: else -> break
		od;
		j = 0;
		page = 0; qage = 0;
		vis = (1 << ins) - 1;
		printf("@ the primary restarts (or a standby takes over): its lease table is lost\n")
	}
}

init
{
	atomic {
		byte k;
		spid[0] = 1; sup[0] = 1;		/* S1's sender, identified (bel, idst, cs) */
#if NSLOT > 1 && !defined(SLOT1_FREE)
		spid[1] = 2; s2[1] = 1; sup[1] = 1;
#endif
#if defined(BINDING) && defined(BOUND_FIRST)
		bpid = 1; bok = 1;
		printf("@ S1 has identified sender 1; its question session obtained a lease for sender 1 before\n");
#elif defined(BINDING)
		printf("@ S1 has identified sender 1; its question session is new: it obtained no lease yet\n");
#endif
		run Tick();
		run Net();
		run Worker();
		run Reader();
		for (k : 0 .. NC - 1) {
			run Writer(k)
		}
#if PREADS
		run PRead();
#endif
#if RESTARTS
		run Restart();
#endif
		k = 0
	}
}
