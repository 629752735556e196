// Package move is the decision core of one partition move on its
// destination: the worker of seed 000 as a pure transition function. Start
// with Step.
//
// Step(state, now, event) returns the next state and the effects to carry
// out; it reads no clock (now is the caller's monotonic time), does no I/O
// and draws no random numbers. The worker actor around it performs the
// effects (listings and chunk reads from the source over NATS, the freeze
// requests, verify, install, the flip, leader reads) and feeds their
// outcomes back as events. Every rule it decides is tested alone in
// move_test.go, the test names quoting the rule.
package move

import (
	"fmt"
	"time"
)

// Config is the worker's part of the seed's constants table.
type Config struct {
	// CatchUpStopBytes: pre-copy stops once a pass copies this little (the
	// seed's 4 MiB): the freeze then drains only a small tail.
	CatchUpStopBytes int64
	// MaxCatchUpPasses and MaxPassesWithoutProgress bound the pre-copy of a
	// partition written faster than it copies (20 and 3): it freezes anyway.
	MaxCatchUpPasses         int
	MaxPassesWithoutProgress int
	// FreezeTTL is how long a freeze holds unless re-armed (30 s); Finalize
	// re-arms every quarter of it.
	FreezeTTL time.Duration
	// ReproposeFor bounds re-proposing a flip whose outcome is unknown (2
	// minutes), after which the freeze is let lapse.
	ReproposeFor time.Duration
	// UnknownSettle: a leader read counts as proof that a flip did not
	// commit only if it started this long after the last unknown proposal
	// (15 s): a proposal can still reach the log that late.
	UnknownSettle time.Duration
	// ForcePromoteAfter: how long the source must be dead, by the leader's
	// stamp and by this worker's own clock, before the copy is promoted (2
	// minutes).
	ForcePromoteAfter time.Duration
	// RetryAfter paces retries of a failed step (a pass, a freeze request,
	// an install, a leader read).
	RetryAfter time.Duration
}

// DefaultConfig is the seed's constants table.
func DefaultConfig() Config {
	return Config{CatchUpStopBytes: 4 << 20, MaxCatchUpPasses: 20, MaxPassesWithoutProgress: 3,
		FreezeTTL: 30 * time.Second, ReproposeFor: 2 * time.Minute, UnknownSettle: 15 * time.Second,
		ForcePromoteAfter: 2 * time.Minute, RetryAfter: time.Second}
}

// Validate reports the first field out of range.
func (c Config) Validate() error {
	if c.CatchUpStopBytes < 0 {
		return fmt.Errorf("move config: CatchUpStopBytes %d must not be negative", c.CatchUpStopBytes)
	}
	if c.MaxCatchUpPasses < 1 || c.MaxPassesWithoutProgress < 1 {
		return fmt.Errorf("move config: MaxCatchUpPasses %d and MaxPassesWithoutProgress %d must be positive", c.MaxCatchUpPasses, c.MaxPassesWithoutProgress)
	}
	if c.FreezeTTL < 4*time.Millisecond {
		return fmt.Errorf("move config: FreezeTTL %s must be at least 4ms (it is re-armed every quarter)", c.FreezeTTL)
	}
	if c.ReproposeFor <= 0 || c.UnknownSettle <= 0 || c.ForcePromoteAfter <= 0 || c.RetryAfter <= 0 {
		return fmt.Errorf("move config: ReproposeFor, UnknownSettle, ForcePromoteAfter and RetryAfter must be positive")
	}
	return nil
}

// Phase is where a move stands.
type Phase int

const (
	// CatchUp copies while the source serves (rule C1).
	CatchUp Phase = iota
	// Staging makes the caught-up copy verified and durable before the
	// freeze, so the install under it only renames (issue 46). Its outcome
	// does not gate the freeze: a copy that could not be staged is made
	// durable by the install, as before.
	Staging
	// Placing installs the staged copy at the partition's path before the
	// freeze (issue 46): under the freeze remain only its tail, written
	// into it where it is, the fence and the flip. An install that fails
	// here is done under the freeze, as before.
	Placing
	// Freezing waits for PrepareHandoff's answer.
	Freezing
	// Finalize drains the tail under the freeze (rules F7, F8).
	Finalize
	// Fencing waits for the fence's answer (rule F9).
	Fencing
	// Verifying waits for the staged copy's verify (rules V2, V3).
	Verifying
	// Installing waits for the install (rename, marker, durable).
	Installing
	// Flipping waits for the flip's answer (rule O3).
	Flipping
	// Resolving asks the leader what became of a flip whose outcome is
	// unknown (rules X1-X8).
	Resolving
	// Done: this node owns the partition.
	Done
	// Ended: the move is over without a flip (refused by the leader).
	Ended
	// Blocked: the worker gave up until the move is aborted, re-planned or
	// the destination restarts (rule V4).
	Blocked
)

var phaseNames = [...]string{"catch_up", "staging", "placing", "freezing", "finalize", "fencing", "verifying", "installing", "flipping", "resolving", "done", "ended", "blocked"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// State is one move's worker state. The zero value with Phase CatchUp is a
// fresh move; Step keeps everything else.
type State struct {
	Phase Phase
	// Pass counts CatchUp passes; NoProgress the passes in a row whose copy
	// did not shrink; LastCopied the bytes of the previous pass (-1: none).
	Pass, NoProgress int
	LastCopied       int64
	// NonConverged: the freeze came from a pass bound, not a small tail.
	NonConverged bool
	// Token is the source's freeze token; Fenceable is false for a source
	// that returns none (rule F11).
	Token     string
	Fenceable bool
	// Frozen: a freeze of ours is believed to hold on the source (no 409
	// seen since it was armed). RenewedAt is when the request behind the
	// latest renewal the source confirmed was sent (PrepareHandoff, a
	// re-arm or a fence answered OK), on the worker's clock: the source
	// stamps until = receipt + FreezeTTL, and the receipt came after the
	// send, so the freeze holds at least until RenewedAt + FreezeTTL.
	Frozen    bool
	RenewedAt time.Duration
	// QuietPasses counts consecutive Finalize passes that copied nothing
	// with the same HWM (rule F8); FinalHWM is the HWM they reported.
	QuietPasses int
	FinalHWM    int64
	// Reached: a listing from the source arrived at least once (rule P3).
	// KnownHWM is the highest HWM any listing reported, a pass whose chunk
	// reads failed and PrepareHandoff's answer included: the source had made
	// every record below it visible, so nothing is promoted, installed or
	// flipped below it (rule P4). CopiedTo is the staged copy's next offset.
	Reached  bool
	KnownHWM int64
	CopiedTo int64
	// VerifyFailures counts failed verifies of this move (rules V3, V4).
	VerifyFailures int
	// Placed: the copy is at the partition's path, installed before the
	// freeze at the HWM it was staged at; no flip was proposed on it.
	// Installed: the install under the freeze made it durable at FinalHWM
	// there (renamed, or its tail sealed in place): a flip may follow.
	Placed, Installed bool
	// Promote: the move is a force-promote (rule P5).
	Promote bool
	// FirstUnknown and LastUnknown are when the first and the latest flip
	// with an unknown outcome were proposed; Unknown is set while one is.
	Unknown                   bool
	FirstUnknown, LastUnknown time.Duration
	// SourceDeadSince is when this worker first read the source dead
	// (its own clock, rule P2); SourceDead is whether it reads dead now;
	// BehindLogged: the "copy behind" error was logged for this death.
	SourceDead      bool
	SourceDeadSince time.Duration
	BehindLogged    bool
	// SourceBeats is the source's heartbeat counter when this worker's
	// clock of its death started.
	SourceBeats uint64
	// Asking: a listing or a prepare is on its way to the source. Its
	// answer may carry an HWM above KnownHWM, so no promote is decided
	// until it has come back or failed (rules P2, P4); when it fails, the
	// gate runs again on Seen, the latest liveness reading, at once.
	Asking bool
	Seen   SourceSeen
	// Confirming: a ConfirmSource is out; its answer is a SourceSeen with
	// Leader set, or SourceUnknown.
	Confirming bool
	// BlockedReason says why Phase is Blocked.
	BlockedReason string
	// Attempt numbers the latest request of the move's main line (a pass,
	// a prepare, a fence, a verify, an install, a flip, a leader read):
	// Step stamps each such effect with the next number and acts only on
	// the outcome, or the retry, of the current one. A request it moved on
	// from (a pass of a freeze that lapsed, a retry scheduled before a
	// later answer carried the move on) still answers, and acting on that
	// answer would put a second request beside the current one: a second
	// install of the same copy sets aside the first one's at the path
	// (issue 26).
	Attempt uint64
}

// New is a fresh move.
func New() State { return State{Phase: CatchUp, LastCopied: -1} }

// Events the worker feeds to Step.
type (
	// Start begins (or resumes after a restart) the move. InstalledAtPath:
	// an earlier worker of this very move left its copy installed at the
	// partition's path (a crash, or a restart of the worker), and a flip
	// of it may be pending.
	Start struct{ InstalledAtPath bool }
	// PassDone is the outcome of one copy pass: a listing and the chunk
	// reads of what the copy lacked. Err set means the source could not be
	// reached or the pass failed; then only Listed and HWM are valid:
	// Listed says the listing arrived before the pass failed.
	PassDone struct {
		Copied   int64 // bytes copied by this pass
		HWM      int64 // the source's HWM in the listing
		CopiedTo int64 // the staged copy's next offset after the pass
		Listed   bool
		Err      error
		// Attempt is the Fetch's (as for every outcome below).
		Attempt uint64
	}
	// Frozen is PrepareHandoff's answer: a token (or none from an older
	// source) and the frontier's HWM. Err: no freeze. SentAt is when the
	// request was sent, on the worker's clock (as for Rearmed and Fenced).
	Frozen struct {
		Token   string
		HWM     int64
		SentAt  time.Duration
		Err     error
		Attempt uint64
	}
	// RearmDue is the re-arm timer of the freeze Token firing (rule F7):
	// each freeze has its own, and a freeze armed again starts a new one.
	RearmDue struct{ Token string }
	// Rearmed is the answer to a re-arm of Token: Lapsed when the source
	// answered 409 (that freeze is gone), Err for no answer.
	Rearmed struct {
		Token  string
		Lapsed bool
		SentAt time.Duration
		Err    error
	}
	// Fenced is the fence's answer: Refused (409: the freeze is gone or
	// the HWM moved), Err for no answer.
	Fenced struct {
		Refused bool
		SentAt  time.Duration
		Err     error
		Attempt uint64
	}
	// Verified is the staged copy's verify at the HWM: OK when it recovers
	// to exactly that offset.
	Verified struct {
		OK      bool
		Attempt uint64
	}
	// Staged is the outcome of a Stage: OK when the copy verified at its
	// HWM and is durable with its marker.
	Staged struct {
		OK      bool
		Attempt uint64
	}
	// Installed is the install's outcome. NotWhole (with Err): the install
	// ran, but the partition's path does not hold the copy at its HWM when
	// read back, so there is nothing to flip to and nothing to retry.
	Installed struct {
		Err      error
		NotWhole bool
		Attempt  uint64
	}
	// FlipAnswered is the flip proposal's answer: Code when the state
	// machine answered, Err when the outcome is unknown.
	FlipAnswered struct {
		Code    FlipCode
		Err     error
		Attempt uint64
	}
	// LeaderRead is the assignment as the leader has it (rule X2), asked
	// at StartedAt. NotLeaderRead marks an answer that is not one (a
	// follower's, an older leader's): it may confirm a flip, never undo one
	// (rule X8). Err: no answer.
	LeaderRead struct {
		StartedAt     time.Duration
		Found         bool
		Owner, Target string
		NotLeaderRead bool
		Err           error
		Attempt       uint64
	}
	// SourceSeen is the source's liveness as the leader stamps it: Dead,
	// and how old the leader's last heartbeat stamp is. Heartbeats is the
	// record's heartbeat counter: a counter that moved while the record
	// read dead throughout means the source was back in between (a replica
	// that lagged or was cut off missed it), so the worker's own clock
	// restarts. Leader: read through the leader (a ReadIndex), not from
	// this node's replica, which may be stale; only such a reading can
	// promote (rule P2).
	SourceSeen struct {
		Dead       bool
		StampAge   time.Duration
		Heartbeats uint64
		Leader     bool
	}
	// SourceUnknown: ConfirmSource's read through the leader failed.
	SourceUnknown struct{}
	// Retry is the retry timer of Attempt firing: it retries that request
	// only if nothing was asked since.
	Retry struct{ Attempt uint64 }
)

// FlipCode is the state machine's answer to a flip.
type FlipCode int

const (
	FlipOK FlipCode = iota
	FlipRefused
	FlipNotFound
)

// Effects Step asks the worker to carry out.
type (
	// Fetch runs one copy pass (list, then read what the copy lacks).
	// Attempt, here and in every request of the main line below, is the
	// number its outcome carries back (State.Attempt).
	Fetch struct {
		Final   bool
		Attempt uint64
	}
	// PrepareHandoff asks the source to freeze and report (rules F1-F5).
	PrepareHandoff struct{ Attempt uint64 }
	// ScheduleRearm arms the re-arm timer of the freeze Token (rule F7).
	ScheduleRearm struct {
		After time.Duration
		Token string
	}
	// Rearm presents the token to extend its freeze (rule F6).
	Rearm struct{ Token string }
	// Fence presents the token with the copy's HWM (rule F9).
	Fence struct {
		Token   string
		HWM     int64
		Attempt uint64
	}
	// Verify checks that the staged copy recovers to exactly HWM, cutting
	// a copy past it back first (rule V2).
	Verify struct {
		HWM     int64
		Attempt uint64
	}
	// Stage verifies the caught-up copy at HWM and makes it durable, with
	// the consumer position, the cursors and the marker it would be
	// installed with now, before the freeze.
	Stage struct {
		HWM     int64
		Attempt uint64
	}
	// DiscardCopy throws the staged copy away, to copy from scratch.
	DiscardCopy struct{}
	// Install puts the copy at the partition's path with its marker.
	Install struct {
		HWM     int64
		Force   bool
		Attempt uint64
	}
	// ProposeFlip proposes Owner := this node if Owner is the source and
	// Target this node.
	ProposeFlip struct{ Attempt uint64 }
	// ReadLeader asks the leader for the assignment (rule X2).
	ReadLeader struct{ Attempt uint64 }
	// RenameBack takes the install off the partition's path, back to
	// staging (rule X5).
	RenameBack struct{}
	// RemoveStaging removes the staging copy (rule X6).
	RemoveStaging struct{}
	// ScheduleRetry arms the retry timer of Attempt, the request that
	// failed.
	ScheduleRetry struct {
		After   time.Duration
		Attempt uint64
	}
	// Log is a line for the worker's log at Level ("warn", "error").
	Log struct{ Level, Msg string }
	// Block counts the move in narad_moves_blocked{reason}.
	Block struct{ Reason string }
	// Unblock takes the move out of narad_moves_blocked{reason}.
	Unblock struct{ Reason string }
	// ConfirmSource reads the source's member record through the leader
	// and feeds it back as SourceSeen{Leader: true}: the force-promote
	// gate passed on this node's replica, which may be stale (rule P2).
	ConfirmSource struct{}
)

// Blocked reasons, as in narad_moves_blocked{reason}.
const (
	ReasonCopyUnverifiable     = "copy_unverifiable"
	ReasonSourceDeadCopyBehind = "source_dead_copy_behind"
	// ReasonSourceHWMRegressed: a listing under the freeze reported an HWM
	// below one the source had listed before (rule P4).
	ReasonSourceHWMRegressed = "source_hwm_regressed"
	// ReasonInstallNotWhole: the install did not leave the copy whole at
	// the partition's path (Installed.NotWhole).
	ReasonInstallNotWhole = "install_not_whole"
)

// Step is the transition function: the next state and the effects to
// carry out, given the state, the caller's monotonic now and an event.
func Step(c Config, s State, now time.Duration, ev any) (State, []any) {
	if s.Phase == Done || s.Phase == Ended || s.Phase == Blocked || stale(s, ev) {
		return s, nil
	}
	var heardFx []any
	asking := s.Asking
	switch e := ev.(type) {
	case PassDone:
		if s.Phase == CatchUp || s.Phase == Finalize {
			s.Asking = false
			if e.Err == nil || e.Listed {
				s, heardFx = heard(s)
			}
		}
	case Frozen:
		if s.Phase == Freezing {
			s.Asking = false
			if e.Err == nil {
				s, heardFx = heard(s)
			}
		}
	case Rearmed:
		if e.Err == nil {
			s, heardFx = heard(s)
		}
	case Fenced:
		if s.Phase == Fencing && e.Err == nil {
			s, heardFx = heard(s)
		}
	}
	s, fx := step(c, s, now, ev)
	if asking && !s.Asking && s.Seen.Dead {
		// The request failed with no answer: the gate it held back runs
		// now, not a tick later (a retry may be out again by then).
		var gfx []any
		s, gfx = sourceSeen(c, s, now, s.Seen)
		fx = append(fx, gfx...)
	}
	s, fx = stamp(s, fx)
	return s, append(heardFx, fx...)
}

// stale reports an outcome or a timer the move has moved on from: the
// answer to a request other than the current one (State.Attempt), a retry
// of one, or a re-arm of a freeze other than the one held. Nothing in it
// is acted on, not even as a sign of the source's life.
func stale(s State, ev any) bool {
	switch e := ev.(type) {
	case PassDone:
		return e.Attempt != s.Attempt
	case Frozen:
		return e.Attempt != s.Attempt
	case Fenced:
		return e.Attempt != s.Attempt
	case Verified:
		return e.Attempt != s.Attempt
	case Staged:
		return e.Attempt != s.Attempt
	case Installed:
		return e.Attempt != s.Attempt
	case FlipAnswered:
		return e.Attempt != s.Attempt
	case LeaderRead:
		return e.Attempt != s.Attempt
	case Retry:
		return e.Attempt != s.Attempt
	case RearmDue:
		return e.Token != s.Token
	case Rearmed:
		return e.Token != s.Token
	}
	return false
}

// stamp numbers the main line's requests among fx (at most one a step)
// and gives a retry or a re-arm timer what it belongs to. Asking is set
// while the current request is a listing or a prepare.
func stamp(s State, fx []any) (State, []any) {
	for i, f := range fx {
		switch e := f.(type) {
		case Fetch:
			s.Attempt++
			e.Attempt = s.Attempt
			fx[i], s.Asking = e, true
		case PrepareHandoff:
			s.Attempt++
			e.Attempt = s.Attempt
			fx[i], s.Asking = e, true
		case Fence:
			s.Attempt++
			e.Attempt = s.Attempt
			fx[i], s.Asking = e, false
		case Verify:
			s.Attempt++
			e.Attempt = s.Attempt
			fx[i], s.Asking = e, false
		case Stage:
			s.Attempt++
			e.Attempt = s.Attempt
			fx[i], s.Asking = e, false
		case Install:
			s.Attempt++
			e.Attempt = s.Attempt
			fx[i], s.Asking = e, false
		case ProposeFlip:
			s.Attempt++
			e.Attempt = s.Attempt
			fx[i], s.Asking = e, false
		case ReadLeader:
			s.Attempt++
			e.Attempt = s.Attempt
			fx[i], s.Asking = e, false
		case ScheduleRetry:
			e.Attempt = s.Attempt
			fx[i] = e
		case ScheduleRearm:
			e.Token = s.Token
			fx[i] = e
		}
	}
	return s, fx
}

// heard is an answer from the source: it is alive, whatever its member
// record says, so the worker's own clock of its death restarts (rule P2).
func heard(s State) (State, []any) {
	var fx []any
	if s.SourceDead && s.BehindLogged {
		fx = append(fx, Unblock{Reason: ReasonSourceDeadCopyBehind})
	}
	s.SourceDead, s.BehindLogged = false, false
	return s, fx
}

func step(c Config, s State, now time.Duration, ev any) (State, []any) {
	switch e := ev.(type) {
	case Start:
		if s.VerifyFailures >= 2 {
			// rule V4: a worker restarted or respawned after the copy
			// failed verification twice keeps the verdict (the runner
			// carries the count): the source is never frozen again.
			s.Phase, s.BlockedReason = Blocked, ReasonCopyUnverifiable
			return s, []any{Log{Level: "error", Msg: "move: staged copy cannot be verified (twice before a restart); not freezing the source again"}, Block{Reason: ReasonCopyUnverifiable}}
		}
		if e.InstalledAtPath {
			// Whether the earlier worker proposed its flip is unknown, so
			// the copy is an install whose flip may be pending: the leader
			// settles it (rules X2, X5), and a settled read that shows the
			// move still pending takes it back to staging to resume from
			// (X7), where before issue 46's placing left such copies to be
			// judged by the owner, which seldom vouches (S5).
			s.Installed, s.Unknown, s.FirstUnknown, s.LastUnknown, s.Phase = true, true, now, now, Resolving
			return s, []any{ReadLeader{}}
		}
		return startCopy(s)
	case PassDone:
		return passDone(c, s, e)
	case Frozen:
		return frozen(c, s, e)
	case RearmDue:
		// The freeze is kept re-armed from Finalize until the flip is
		// answered, on this timer, whatever a step takes (rule F7).
		if !s.Frozen || !s.Fenceable {
			return s, nil
		}
		return s, []any{Rearm{Token: s.Token}, ScheduleRearm{After: c.FreezeTTL / 4}}
	case Rearmed:
		if e.Err != nil {
			// No answer proves nothing: the freeze may be lapsing, so it
			// is not counted as renewed, and a flip waits for a fence
			// that is (rule F9).
			return s, nil
		}
		if !e.Lapsed {
			s.RenewedAt = max(s.RenewedAt, e.SentAt)
			return s, nil
		}
		if s.Phase == Finalize {
			// The freeze is gone: commits may have landed behind the copy.
			// Freeze again under a fresh token and drain again (rule F10).
			return freeze(s)
		}
		// Later phases do not flip on a lapsed freeze: the fence before
		// the install, or the one after it, finds out (rules F9, F10).
		s.Frozen = false
		return s, nil
	case Fenced:
		return fenced(c, s, now, e)
	case Verified:
		return verified(s, e)
	case Staged:
		if s.Phase != Staging {
			return s, nil
		}
		if e.OK && !s.Promote {
			// The staged copy goes to the partition's path now, out of
			// the freeze: nothing is flipped to it before the fence, and
			// the install under the freeze seals the tail in place.
			s.Phase = Placing
			return s, []any{Install{HWM: s.CopiedTo}}
		}
		// Not staged: the freeze follows, and the install under it makes
		// the copy durable, as before issue 46.
		return freeze(s)
	case Installed:
		return installed(c, s, now, e)
	case FlipAnswered:
		return flipAnswered(c, s, now, e)
	case LeaderRead:
		return leaderRead(c, s, now, e)
	case SourceSeen:
		if e.Leader {
			s.Confirming = false
		}
		return sourceSeen(c, s, now, e)
	case SourceUnknown:
		s.Confirming = false
		return s, nil
	case Retry:
		return retry(c, s)
	}
	return s, nil
}

func startCopy(s State) (State, []any) {
	s.Phase, s.Pass, s.NoProgress, s.LastCopied, s.NonConverged = CatchUp, 0, 0, -1, false
	s.QuietPasses, s.Frozen = 0, false
	return s, []any{Fetch{}}
}

func freeze(s State) (State, []any) {
	s.Phase, s.Frozen, s.QuietPasses = Freezing, false, 0
	return s, []any{PrepareHandoff{}}
}

func passDone(c Config, s State, e PassDone) (State, []any) {
	if s.Phase != CatchUp && s.Phase != Finalize {
		return s, nil
	}
	if e.Err == nil || e.Listed {
		// A listing that arrived counts even when its chunks did not: the
		// source had made everything below its HWM visible (rule P4).
		s.Reached, s.KnownHWM = true, max(s.KnownHWM, e.HWM)
	}
	if e.Err != nil {
		// The session stays; the next attempt resumes (rule P1).
		return s, []any{ScheduleRetry{After: c.RetryAfter}}
	}
	s.CopiedTo = e.CopiedTo
	if s.Phase == CatchUp {
		s.Pass++
		if s.LastCopied >= 0 && e.Copied >= s.LastCopied {
			s.NoProgress++
		} else {
			s.NoProgress = 0
		}
		s.LastCopied = e.Copied
		switch {
		case e.Copied <= c.CatchUpStopBytes: // rule C2
			return stage(s)
		case s.Pass >= c.MaxCatchUpPasses || s.NoProgress >= c.MaxPassesWithoutProgress: // rule C3
			s.NonConverged = true
			s2, fx := stage(s)
			return s2, append([]any{Log{Level: "warn", Msg: fmt.Sprintf("move: pre-copy did not converge after %d passes; freezing anyway (a longer freeze)", s.Pass)}}, fx...)
		}
		return s, []any{Fetch{}}
	}
	// Finalize: stop only after two consecutive passes that copy nothing
	// and report the same HWM (rule F8).
	if e.Copied == 0 && s.QuietPasses > 0 && e.HWM == s.FinalHWM {
		s.QuietPasses++
	} else if e.Copied == 0 {
		s.QuietPasses = 1
	} else {
		s.QuietPasses = 0
	}
	s.FinalHWM = e.HWM
	if s.QuietPasses == 0 || (s.QuietPasses == 1 && !s.Fenceable) {
		return s, []any{Fetch{Final: true}}
	}
	// One quiet pass, and a fence to come: the fence is the second (rule
	// F8). It presents the copy's HWM under the freeze's token, and the
	// source accepts it only while the freeze holds and its HWM is that
	// one, so an accepted fence is a listing of the same HWM that copies
	// nothing, without a listing's round trip. A source without tokens
	// (rule F11) has no fence and is listed twice.
	s.Phase = Verifying
	return s, []any{Verify{HWM: s.FinalHWM}}
}

// stage follows a pre-copy that caught up (or gave up, rule C3): the copy
// is verified and made durable at the HWM it reached before the source is
// frozen, so that the freeze holds only the tail, the fence and the flip.
func stage(s State) (State, []any) {
	s.Phase = Staging
	return s, []any{Stage{HWM: s.CopiedTo}}
}

func frozen(c Config, s State, e Frozen) (State, []any) {
	if s.Phase != Freezing {
		return s, nil
	}
	if e.Err != nil {
		return s, []any{ScheduleRetry{After: c.RetryAfter}}
	}
	s.Phase, s.Frozen, s.Token, s.Fenceable, s.QuietPasses = Finalize, true, e.Token, e.Token != "", 0
	s.RenewedAt = max(s.RenewedAt, e.SentAt)
	s.Reached, s.KnownHWM = true, max(s.KnownHWM, e.HWM)
	fx := []any{Fetch{Final: true}}
	if s.Fenceable {
		fx = append(fx, ScheduleRearm{After: c.FreezeTTL / 4}) // rule F7
	}
	return s, fx
}

func fenced(c Config, s State, now time.Duration, e Fenced) (State, []any) {
	if s.Phase != Fencing {
		return s, nil
	}
	switch {
	case e.Err != nil:
		return s, []any{ScheduleRetry{After: c.RetryAfter}}
	case e.Refused && s.Installed:
		// The installed copy may lack records committed since: no flip.
		// Once a settled leader read confirms none committed, the copy
		// comes off the path and the move resumes (rule X7).
		s.Frozen, s.Phase = false, Resolving
		return s, []any{ReadLeader{}}
	case e.Refused: // rule F10
		return freeze(s)
	}
	// The fence renewed the TTL (rule F9).
	s.Frozen, s.RenewedAt = true, max(s.RenewedAt, e.SentAt)
	if !freezeHolds(c, s, now) {
		// Answered too late to count on for the install and the flip.
		return s, []any{Fence{Token: s.Token, HWM: s.FinalHWM}}
	}
	if s.Installed {
		// A re-proposal under the renewed freeze (rule X3).
		s.Phase = Flipping
		return s, []any{ProposeFlip{}}
	}
	return install(s)
}

// freezeHolds reports whether our freeze is known to hold for a margin
// more than now. Only a renewal the source confirmed counts: a re-arm
// that got no answer may have been lost while the freeze ran out, and a
// source cut off from us longer than FreezeTTL takes commits again that
// would be stranded past the HWM we flip at (rules F7, F9). The margin, a
// quarter of the TTL, is what may still pass after the check: the flip's
// proposal and its apply on the source's replica, which stops the source's
// actor, and the drift between the two nodes' clocks. A freeze re-armed on
// schedule (every quarter) stays well inside it: it takes two re-arms in a
// row without an answer to fence again.
func freezeHolds(c Config, s State, now time.Duration) bool {
	return s.Frozen && now < s.RenewedAt+c.FreezeTTL-c.FreezeTTL/4
}

// install decides the install at FinalHWM. Below the highest HWM a listing
// reported, it would drop records the source had made visible, and their
// offsets would be reused (rule P4). Under a freeze that held, only a source
// whose HWM went backwards gets there: it lost acknowledged records itself,
// an anomaly for an operator, so the move blocks instead.
func install(s State) (State, []any) {
	if s.FinalHWM < s.KnownHWM {
		s.Phase, s.Frozen, s.BlockedReason = Blocked, false, ReasonSourceHWMRegressed
		return s, []any{
			Log{Level: "error", Msg: fmt.Sprintf("move: the source's high watermark went back from %d to %d, so records it had made visible are gone; not installing the copy (copy next offset %d)", s.KnownHWM, s.FinalHWM, s.CopiedTo)},
			Block{Reason: ReasonSourceHWMRegressed},
		}
	}
	s.Phase = Installing
	return s, []any{Install{HWM: s.FinalHWM, Force: s.Promote}}
}

func verified(s State, e Verified) (State, []any) {
	if s.Phase != Verifying {
		return s, nil
	}
	if e.OK {
		if s.Promote || !s.Fenceable {
			// A force-promote has no freeze (rule P5); a source without
			// tokens has no fence (rule F11).
			var fx []any
			if !s.Promote {
				fx = append(fx, Log{Level: "warn", Msg: "move: the source returned no freeze token; installing without a fence"})
			}
			s2, ifx := install(s)
			return s2, append(fx, ifx...)
		}
		// The fence, right before the install (rule F9).
		s.Phase = Fencing
		return s, []any{Fence{Token: s.Token, HWM: s.FinalHWM}}
	}
	s.VerifyFailures++
	if s.VerifyFailures >= 2 || s.Promote {
		// rule V4: the source is never frozen again for this move.
		s.Phase, s.Frozen, s.BlockedReason = Blocked, false, ReasonCopyUnverifiable
		return s, []any{Log{Level: "error", Msg: "move: staged copy cannot be verified; not freezing the source again"}, Block{Reason: ReasonCopyUnverifiable}}
	}
	// rule V3: throw it away and copy once more from scratch.
	s, fx := startCopy(s)
	s.CopiedTo = 0
	return s, append([]any{DiscardCopy{}}, fx...)
}

func installed(c Config, s State, now time.Duration, e Installed) (State, []any) {
	if s.Phase == Placing {
		return placed(s, e)
	}
	if s.Phase != Installing {
		return s, nil
	}
	if e.NotWhole {
		// Flipping would hand the partition to whatever the path holds;
		// the freeze is let lapse and the move waits for an operator.
		// The worker logged what it read back.
		s.Phase, s.Frozen, s.BlockedReason = Blocked, false, ReasonInstallNotWhole
		return s, []any{Block{Reason: ReasonInstallNotWhole}}
	}
	if e.Err != nil {
		return s, []any{ScheduleRetry{After: c.RetryAfter}}
	}
	s.Installed = true
	if s.Fenceable && !s.Promote && !freezeHolds(c, s, now) {
		// The freeze lapsed during the install, or is not known to hold
		// long enough: fence again before any flip (rule F9).
		s.Phase = Fencing
		return s, []any{Fence{Token: s.Token, HWM: s.FinalHWM}}
	}
	s.Phase = Flipping
	return s, []any{ProposeFlip{}}
}

// placed follows the install before the freeze. A copy the path does not
// hold whole blocks the move as under the freeze; any other failure leaves
// the install to the freeze, where it renames or seals what it finds.
func placed(s State, e Installed) (State, []any) {
	if e.NotWhole {
		s.Phase, s.BlockedReason = Blocked, ReasonInstallNotWhole
		return s, []any{Block{Reason: ReasonInstallNotWhole}}
	}
	s.Placed = e.Err == nil
	return freeze(s)
}

func flipAnswered(c Config, s State, now time.Duration, e FlipAnswered) (State, []any) {
	if s.Phase != Flipping {
		return s, nil
	}
	if e.Err != nil {
		// rule X1: not proof that it failed; keep the install, ask.
		if !s.Unknown {
			s.Unknown, s.FirstUnknown = true, now
		}
		s.LastUnknown, s.Phase = now, Resolving
		return s, []any{ReadLeader{}}
	}
	switch e.Code {
	case FlipOK: // rules O3, O4
		s.Phase, s.Frozen = Done, false
		return s, nil
	default:
		// The state machine refused it, so it did not commit; but an
		// earlier proposal with an unknown outcome might have. Let the
		// leader settle that (rule X5).
		if s.Unknown {
			s.Phase = Resolving
			return s, []any{ReadLeader{}}
		}
		return endRefused(s)
	}
}

// endRefused ends a move the leader refused (rule X6): the copy goes back
// off the path and the staging copy is removed.
func endRefused(s State) (State, []any) {
	var fx []any
	if s.Installed || s.Placed {
		fx = append(fx, RenameBack{})
		s.Installed, s.Placed = false, false
	}
	s.Phase, s.Frozen = Ended, false
	return s, append(fx, RemoveStaging{})
}

func leaderRead(c Config, s State, now time.Duration, e LeaderRead) (State, []any) {
	if s.Phase != Resolving {
		return s, nil
	}
	if e.Err != nil {
		return s, []any{ScheduleRetry{After: c.RetryAfter}}
	}
	if e.Found && e.Owner == Self {
		s.Phase, s.Frozen, s.Unknown = Done, false, false // rule X3: it committed
		return s, nil
	}
	if e.NotLeaderRead {
		return s, []any{ScheduleRetry{After: c.RetryAfter}} // rule X8
	}
	settled := e.StartedAt >= s.LastUnknown+c.UnknownSettle // rule X5
	if e.Found && e.Owner == Source && e.Target == Self {
		if now-s.FirstUnknown < c.ReproposeFor && s.Frozen && s.Fenceable {
			// rule X3: propose again under the re-armed freeze, checked by
			// the fence (which also proves the HWM still matches).
			s.Phase = Fencing
			return s, []any{Fence{Token: s.Token, HWM: s.FinalHWM}}
		}
		// No longer proposable: let the freeze lapse; once a settled read
		// confirms it did not commit, resume from the staged copy (X7).
		s.Frozen = false
		if !settled {
			return s, []any{ScheduleRetry{After: c.RetryAfter}}
		}
		s.Unknown, s.Installed, s.Placed = false, false, false
		s2, fx := startCopy(s)
		return s2, append([]any{RenameBack{}}, fx...)
	}
	// Refused for good (re-planned, aborted, topic deleted): rule X6, once
	// a settled read says so.
	if !settled {
		return s, []any{ScheduleRetry{After: c.RetryAfter}}
	}
	return endRefused(s)
}

// Self and Source are what the worker puts in LeaderRead.Owner and
// .Target for this node and the move's source (Step knows no node ids);
// any other node is passed as its id.
const (
	Self   = "\x00self"
	Source = "\x00source"
)

// Named is a node id as Step knows it in a LeaderRead: Self, Source, or
// the id itself.
func Named(id, self, source string) string {
	switch id {
	case self:
		return Self
	case source:
		return Source
	}
	return id
}

func retry(c Config, s State) (State, []any) {
	switch s.Phase {
	case CatchUp:
		return s, []any{Fetch{}}
	case Freezing:
		return s, []any{PrepareHandoff{}}
	case Finalize:
		return s, []any{Fetch{Final: true}}
	case Fencing:
		return s, []any{Fence{Token: s.Token, HWM: s.FinalHWM}}
	case Installing:
		return s, []any{Install{HWM: s.FinalHWM, Force: s.Promote}}
	case Resolving:
		return s, []any{ReadLeader{}}
	}
	return s, nil
}

// sourceSeen runs the force-promote gate (rules P2-P5): only before the
// install, only after the source was dead ForcePromoteAfter by both
// clocks, only for a session that reached it, and only for a copy that
// holds everything the source made visible.
func sourceSeen(c Config, s State, now time.Duration, e SourceSeen) (State, []any) {
	s.Seen = e
	if !e.Dead {
		var fx []any
		if s.SourceDead && s.BehindLogged {
			fx = append(fx, Unblock{Reason: ReasonSourceDeadCopyBehind})
		}
		s.SourceDead, s.BehindLogged = false, false // its own clock restarts (rule P2)
		return s, fx
	}
	if !s.SourceDead || e.Heartbeats != s.SourceBeats {
		// First seen dead, or its counter moved since: it was back in
		// between, unseen by this node, and its own clock restarts (P2).
		s.SourceDead, s.SourceDeadSince, s.SourceBeats = true, now, e.Heartbeats
	}
	if s.Installed || s.Promote || s.Asking || (s.Phase != CatchUp && s.Phase != Staging && s.Phase != Freezing && s.Phase != Finalize) {
		return s, nil
	}
	if now-s.SourceDeadSince < c.ForcePromoteAfter || e.StampAge < c.ForcePromoteAfter {
		return s, nil
	}
	if !s.Reached {
		return s, nil // rule P3: nothing known of what the source exposed
	}
	if s.CopiedTo < s.KnownHWM { // rule P4
		if s.BehindLogged {
			return s, nil
		}
		s.BehindLogged = true
		return s, []any{
			Log{Level: "error", Msg: fmt.Sprintf("move: the source is dead and this node's copy is behind its last high watermark, so it cannot force-promote (copy next offset %d, source high watermark %d)", s.CopiedTo, s.KnownHWM)},
			Block{Reason: ReasonSourceDeadCopyBehind},
		}
	}
	if !e.Leader {
		// The gate passed on this node's replica: confirm with the leader
		// before anything that cannot be undone (rule P2), one read at a
		// time.
		if s.Confirming {
			return s, nil
		}
		s.Confirming = true
		return s, []any{ConfirmSource{}}
	}
	// rule P5: skip the freeze; verify and install at the known HWM, clamped.
	s.Promote, s.Frozen, s.FinalHWM, s.Phase = true, false, s.KnownHWM, Verifying
	return s, []any{Log{Level: "warn", Msg: fmt.Sprintf("move: the source has been dead for %s; force-promoting the copy at high watermark %d", c.ForcePromoteAfter, s.KnownHWM)}, Verify{HWM: s.KnownHWM}}
}

// Watched is the force-promote gate's input from the source's member
// record as this node's replica has it (rule P2). The record reads dead
// only after DeadTimeout without a heartbeat on the leader's clock, so its
// stamp is at least that old when the worker first sees it dead; the
// worker's own clock adds the time since.
// A record whose counter moved since the worker's clock started counts
// from now. leader says the record was read through the leader.
func Watched(s State, now time.Duration, dead bool, heartbeats uint64, leader bool, deadTimeout time.Duration) SourceSeen {
	if !dead {
		return SourceSeen{Heartbeats: heartbeats, Leader: leader}
	}
	age := deadTimeout
	if s.SourceDead && heartbeats == s.SourceBeats {
		age += now - s.SourceDeadSince
	}
	return SourceSeen{Dead: true, StampAge: age, Heartbeats: heartbeats, Leader: leader}
}

// Gone reports a move onto self that is gone (aborted, re-planned, its
// target cleared, its topic deleted) as the local replica has the
// partition's assignment (found, owner, target): neither owner nor target
// is self. A worker that stops with the move still targeted here keeps
// the copy to resume from.
func Gone(found bool, owner, target, self string) bool {
	return !found || (owner != self && target != self)
}

// ReleaseOnStop decides whether a worker that stops without having seen
// its flip answered lifts the source's freeze. Before the install no flip
// was proposed. After it, a flip may have committed: its answer can still
// be on its way when the runner, which saw the flip in the replica, stops
// the worker, and a freeze lifted then lets the source take commits past
// the HWM the flip named until its own replica has the flip. So an
// installed move releases only when the local replica shows it gone: the
// replica applies in log order, so no flip committed before that, and a
// later one is refused. Otherwise the freeze lapses on its TTL.
func ReleaseOnStop(installed, found bool, owner, target, self string) bool {
	return !installed || Gone(found, owner, target, self)
}

// CopyEnd is what the worker knows of its staging copy when the move ends
// without a flip of its own: refused by the leader, or stopped while gone.
type CopyEnd struct {
	// OwnsIt: this node owns the partition by then (an earlier attempt's
	// flip committed).
	OwnsIt bool
	// TookInstallOff: this move renamed its install back off the path.
	TookInstallOff bool
	// PathHoldsSourceInstall: the partition's path holds a copy installed
	// from the move's source (its move marker names the source).
	PathHoldsSourceInstall bool
	// OwnerDeadOrGone: the partition's owner reads dead or has no member
	// record.
	OwnerDeadOrGone bool
	// HoldsRecords: the staging copy holds records.
	HoldsRecords bool
}

// CopyFate is what becomes of the staging copy.
type CopyFate int

const (
	// RemoveCopy deletes it: every record it holds is elsewhere.
	RemoveCopy CopyFate = iota
	// SetAsideCopy renames it to a quarantine and logs it at error: it
	// may be the only copy of its records.
	SetAsideCopy
)

// EndCopy decides the fate of the staging copy of a move that ends without
// its flip (rules X6, X9). If this node owns the partition by then, the copy
// is kept when it may hold records the partition's path lacks: the move took
// its install off the path, or no copy installed from the source is there;
// when the path holds the source's install and the move took nothing off
// it, the flip that committed was an earlier attempt's, and this copy, a
// re-copy, goes. Otherwise the copy goes unless the owner reads dead or is
// no member: then it may be the only copy left. A copy without records is
// never worth keeping.
func EndCopy(c CopyEnd) (CopyFate, string) {
	switch {
	case !c.HoldsRecords:
		return RemoveCopy, "holds no records"
	case c.OwnsIt && c.TookInstallOff:
		return SetAsideCopy, "this node owns the partition, and the move took its install off the path"
	case c.OwnsIt && !c.PathHoldsSourceInstall:
		return SetAsideCopy, "this node owns the partition, and its path holds no copy installed from the source"
	case c.OwnsIt:
		return RemoveCopy, "the partition's path holds an earlier attempt's install, which flipped"
	case c.OwnerDeadOrGone:
		return SetAsideCopy, "the owner reads dead or is no member: the copy may be the only one"
	}
	return RemoveCopy, "the owner holds the partition"
}
