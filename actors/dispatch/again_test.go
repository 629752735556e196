package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// reopenWAL closes the rig's WAL and opens it again, as a restart would:
// a new life, under a new ID.
func (r *rig) reopenWAL() {
	r.t.Helper()
	if err := r.wal.Close(); err != nil {
		r.t.Fatal(err)
	}
	wal, err := storage.OpenWAL(r.walDir, storage.DefaultWALConfig())
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = wal.Close() })
	r.wal, r.deps.WAL = wal, wal
}

// appendOnly writes rec to the WAL alone, as a node that died before
// dispatching it left it, and returns its seq.
func (r *rig) appendOnly(rec storage.WALRecord) uint64 {
	r.t.Helper()
	seq, err := r.wal.Append(context.Background(), rec)
	if err != nil {
		r.t.Fatal(err)
	}
	return seq
}

// fireTimers runs the timers the dispatcher set so far (its ticks).
func (r *rig) fireTimers() {
	c := r.deps.Clock.(*stillClock)
	c.mu.Lock()
	timers := c.timers
	c.timers = nil
	c.mu.Unlock()
	for _, tm := range timers {
		c.mu.Lock()
		stopped := tm.stopped
		c.mu.Unlock()
		if !stopped {
			tm.f()
		}
	}
}

// sentCommit is what the test reads of one commit the owner was asked.
type sentCommit struct {
	wal   uint64
	seqs  []uint64
	again []bool
}

func (r *rig) sentCommits() []sentCommit {
	r.owners.mu.Lock()
	defer r.owners.mu.Unlock()
	var out []sentCommit
	for _, c := range r.owners.commits {
		s := sentCommit{wal: c.WAL}
		for _, rec := range c.Records {
			s.seqs = append(s.seqs, rec.Seq)
			s.again = append(s.again, rec.Again)
		}
		out = append(out, s)
	}
	return out
}

// A commit names the WAL life its records' seqs come from, one life a
// commit, and flags Again exactly the records that may be in their
// partition already: those the start's replay read, and those whose last
// commit got no answer. A fresh record is never flagged, so its partition
// never looks it up.
func TestACommitNamesItsWALLifeAndFlagsWhatMayBeInAlready(t *testing.T) {
	store := &fakeStore{topics: map[string]messages.Topic{"t": {Name: "t", Incarnation: 3, Partitions: 2}}, members: map[string]messages.Member{}}
	r := newRig(t, store)
	rec := func(p int32) storage.WALRecord {
		return storage.WALRecord{Topic: "t", Incarnation: 3, Partition: p, Body: []byte("b")}
	}
	old := r.appendOnly(rec(0))
	oldLife := r.wal.Origin(old).WAL
	r.reopenWAL()
	mine := r.appendOnly(rec(0))
	life := r.wal.Origin(mine).WAL
	if oldLife == 0 || life == 0 || oldLife == life {
		t.Fatalf("WAL lives: got %d then %d, want two IDs that are not 0", oldLife, life)
	}
	r.start()
	r.waitBacklog(0)

	unanswered := true
	r.owners.mu.Lock()
	r.owners.answer = func(c *messages.Commit) (any, error) {
		if c.Key.Partition == 1 && unanswered {
			unanswered = false
			return nil, context.DeadlineExceeded
		}
		return answerOK(c)
	}
	r.owners.mu.Unlock()
	r.produce(rec(1))
	r.waitSent(3)
	// Ticks until the retry went out: the failure reaches the actor on its
	// own time, and a tick before it retries nothing.
	deadline := time.Now().Add(5 * time.Second)
	for len(r.sentCommits()) < 4 && time.Now().Before(deadline) {
		r.fireTimers()
		time.Sleep(5 * time.Millisecond)
	}
	r.waitBacklog(0)
	r.produce(rec(0))
	r.waitBacklog(0)

	got := r.sentCommits()
	want := []sentCommit{
		{wal: oldLife, seqs: []uint64{old}, again: []bool{true}},    // replayed, the life before
		{wal: life, seqs: []uint64{mine}, again: []bool{true}},      // replayed, this life: a commit of its own
		{wal: life, seqs: []uint64{mine + 1}, again: []bool{false}}, // fresh
		{wal: life, seqs: []uint64{mine + 1}, again: []bool{true}},  // its commit got no answer
		{wal: life, seqs: []uint64{mine + 2}, again: []bool{false}}, // fresh
	}
	if !slices.EqualFunc(got, want, func(a, b sentCommit) bool {
		return a.wal == b.wal && slices.Equal(a.seqs, b.seqs) && slices.Equal(a.again, b.again)
	}) {
		t.Fatalf("commits sent:\n got  %+v\n want %+v", got, want)
	}
}

// waitSent waits until the owner was asked n commits in all.
func (r *rig) waitSent(n int) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(r.sentCommits()) < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("commits sent: got %d, want %d", len(r.sentCommits()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
