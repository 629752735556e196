// Package membership is the pure core of member liveness, run by the node
// that leads the metadata shard. Start with Tracker.Observe in
// membership.go: it is where a member is found dead, or alive again, and
// the Transitions it answers are all the leader proposes.
//
// Each node bumps its own heartbeat counter in the metadata shard
// (metastore.Store.Heartbeat) every HeartbeatInterval. A Raft state machine
// cannot read a clock, so the time of a heartbeat is not in the log: the
// leader's Tracker stamps every change of a counter on the leader's own
// monotonic clock, and Observe answers which statuses to change: dead after
// DeadTimeout without a change, alive again as soon as the counter of a
// dead member moves. A new leader has a new Tracker, whose stamps all start
// at its own first observation, so it never marks a member dead, or counts
// it dead (DeadFor), on a stamp it inherited (rule T1's "measured on the
// leader's own clock").
//
// The Tracker has no clock, no I/O and no goroutine: every method takes
// now. The caller proposes the transitions (metastore.Store.SetMemberStatusIf
// with Transition.Command, a compare-and-set that a heartbeat landing in
// between refuses), and it serializes calls: a Tracker is not safe for
// concurrent use.
package membership

import (
	"errors"
	"fmt"
	"time"

	"github.com/naradmq/narad/messages"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("invalid membership config")

const (
	// MinHeartbeatsPerTimeout: DeadTimeout must cover at least this many
	// heartbeat intervals, so one late or lost heartbeat never marks a live
	// member dead.
	MinHeartbeatsPerTimeout = 3
)

// Config bounds liveness.
type Config struct {
	// DeadTimeout is how long the leader waits, on its own clock, without
	// seeing a member's heartbeat counter change before it marks the member
	// dead.
	DeadTimeout time.Duration
	// HeartbeatInterval is how often each node proposes a heartbeat, and how
	// often the leader should run Observe at the least. At most
	// DeadTimeout / MinHeartbeatsPerTimeout.
	HeartbeatInterval time.Duration
}

// WithDefaults returns c with every zero field set to its default: a
// member is dead after 30 s without a heartbeat, and heartbeats every 2 s.
// (Written here rather than as constants, so that mutation testing, which
// cannot see into constants, checks them.)
func (c Config) WithDefaults() Config {
	if c.DeadTimeout == 0 {
		c.DeadTimeout = 30 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 2 * time.Second
	}
	return c
}

// Validate checks the bounds; its errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	if c.DeadTimeout <= 0 {
		return fmt.Errorf("membership: dead timeout %s: must be positive: %w", c.DeadTimeout, ErrInvalidConfig)
	}
	if c.HeartbeatInterval <= 0 {
		return fmt.Errorf("membership: heartbeat interval %s: must be positive: %w", c.HeartbeatInterval, ErrInvalidConfig)
	}
	if c.HeartbeatInterval > c.DeadTimeout/MinHeartbeatsPerTimeout {
		return fmt.Errorf("membership: heartbeat interval %s: must be at most a %dth of the dead timeout %s: %w",
			c.HeartbeatInterval, MinHeartbeatsPerTimeout, c.DeadTimeout, ErrInvalidConfig)
	}
	return nil
}

// Transition is a status change Observe asks the leader to propose.
type Transition struct {
	ID   string
	From string // messages.MemberAlive or messages.MemberDead
	To   string
	// Heartbeats is the counter the tracker saw; a mark dead applies only
	// if it is still the member's counter.
	Heartbeats uint64
	// Silent is how long the counter had not changed, on the tracker's
	// clock (0 for a member coming back): for the log.
	Silent time.Duration
}

// Command is the compare-and-set that applies the transition: From is the
// expected status; a mark dead also expects the counter seen, so a
// heartbeat that landed since refuses it (ResultRefused, retried by the
// next Observe if still due).
func (tr Transition) Command() messages.SetMemberStatus {
	c := messages.SetMemberStatus{ID: tr.ID, Status: tr.To, IfStatus: tr.From}
	if tr.To == messages.MemberDead {
		c.IfHeartbeats = &tr.Heartbeats
	}
	return c
}

// Tracker is the leader's view of heartbeats: per member, the last counter
// it saw and when (its own clock) it saw it change.
type Tracker struct {
	cfg Config
	// mark flips at every Observe; an entry whose mark is not the
	// tracker's was not in the latest list and is forgotten.
	mark    bool
	members map[string]*entry
}

type entry struct {
	heartbeats uint64
	// stamp is when the counter last changed, or the first observation.
	stamp time.Time
	// deadSince is the first observation of the current stretch in which
	// the record read dead and the counter did not move; zero otherwise.
	deadSince time.Time
	mark      bool
}

// NewTracker returns an empty tracker (a new leader's).
func NewTracker(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{cfg: cfg, members: make(map[string]*entry)}, nil
}

// Config returns the tracker's configuration.
func (t *Tracker) Config() Config { return t.cfg }

// Observe records the members as read now from the metadata shard (all of
// them: a member missing from the list is forgotten) and returns the
// transitions due, in the order of members:
//
//   - alive -> dead: the counter has not changed for DeadTimeout since the
//     tracker's stamp (its first observation at the latest);
//   - dead -> alive: the counter changed since the previous observation.
//
// A transition stays due, and is returned again by every Observe, until the
// record reads the new status; proposing one twice is harmless (the second
// compare-and-set is refused). now must be a reading of the leader's
// steady clock (actors/clock: never stepped), never from a record.
func (t *Tracker) Observe(now time.Time, members []messages.Member) []Transition {
	t.mark = !t.mark
	var out []Transition
	for i := range members {
		m := &members[i]
		e, known := t.members[m.ID]
		if !known {
			e = &entry{heartbeats: m.Heartbeats, stamp: now}
			t.members[m.ID] = e
		}
		e.mark = t.mark
		moved := known && m.Heartbeats != e.heartbeats
		if moved {
			e.heartbeats, e.stamp = m.Heartbeats, now
		}
		switch m.Status {
		case messages.MemberDead:
			if moved {
				e.deadSince = time.Time{}
				out = append(out, Transition{ID: m.ID, From: messages.MemberDead, To: messages.MemberAlive, Heartbeats: m.Heartbeats})
			} else if e.deadSince.IsZero() {
				e.deadSince = now
			}
		case messages.MemberAlive:
			e.deadSince = time.Time{}
			if silent := now.Sub(e.stamp); silent >= t.cfg.DeadTimeout {
				out = append(out, Transition{ID: m.ID, From: messages.MemberAlive, To: messages.MemberDead,
					Heartbeats: m.Heartbeats, Silent: silent})
			}
		default:
			// Not a status this tracker changes (a newer binary's): stamp only.
			e.deadSince = time.Time{}
		}
	}
	for id, e := range t.members {
		if e.mark != t.mark {
			delete(t.members, id)
		}
	}
	return out
}

// Stamp returns when, on the tracker's clock, the member's counter last
// changed (its first observation if it has not changed since); false for a
// member the tracker does not know.
func (t *Tracker) Stamp(id string) (time.Time, bool) {
	e, ok := t.members[id]
	if !ok {
		return time.Time{}, false
	}
	return e.stamp, true
}

// DeadFor returns how long, on the tracker's clock, the member's record has
// read dead without its counter moving: from the first Observe that saw it
// so, until now. It is 0 for a member that reads alive, whose counter
// moved at the latest Observe, or that the tracker does not know. It never
// exceeds the truth: a new leader counts from its own first observation.
// For rules P2 (ForcePromoteAfter) and T1 (DeadTargetAbortAfter).
func (t *Tracker) DeadFor(id string, now time.Time) time.Duration {
	e, ok := t.members[id]
	if !ok || e.deadSince.IsZero() {
		return 0
	}
	return max(now.Sub(e.deadSince), 0)
}

// Forget drops what the tracker knows of a member (removed from the
// membership). A later observation of it starts a fresh stamp.
func (t *Tracker) Forget(id string) { delete(t.members, id) }

// Len is the number of members the tracker knows.
func (t *Tracker) Len() int { return len(t.members) }
