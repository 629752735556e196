package partition

import (
	"fmt"
	"slices"
	"testing"

	"github.com/naradmq/narad/messages"
)

// sent is a commit from WAL life wal of the records seqs, each flagged
// Again when again is set; each body names its seq.
func sent(k messages.PartitionKey, wal uint64, again bool, seqs ...uint64) *messages.Commit {
	c := &messages.Commit{Key: k, WAL: wal}
	for _, s := range seqs {
		c.Records = append(c.Records, messages.CommitRecord{Seq: s, Again: again, Body: fmt.Appendf(nil, `"seq %d"`, s)})
	}
	return c
}

// bodies reads partition k's records from offset 0 through replays.
func (r *supervisorRig) bodies(k messages.PartitionKey) []string {
	r.t.Helper()
	var out []string
	for off := int64(0); ; off++ {
		res := r.ask(k, &messages.ReadAt{Offset: off}).(*messages.Reserved)
		if res.Status != messages.StatusOK {
			return out
		}
		out = append(out, string(res.Delivery.Body))
	}
}

func (r *supervisorRig) commitAll(c *messages.Commit) *messages.CommitResult {
	r.t.Helper()
	res := r.ask(c.Key, c).(*messages.CommitResult)
	if res.Status != messages.StatusOK {
		r.t.Fatalf("commit of seqs %v: got status %d (%s), want OK", c.Records, res.Status, res.Err)
	}
	return res
}

// A record its ingress WAL replays after a crash, or its dispatcher sends
// again after losing the answer, is stored once: the partition finds it by
// its origin among what it committed last, in this life and the next, and
// answers it committed. A record not flagged Again, or from another WAL
// life, is written as always: only a record its sender says may be in is
// looked up, and only its own origin matches it.
func TestARecordSentAgainIsStoredOnceInThisLifeAndTheNext(t *testing.T) {
	r := newSupervisorRig(t)
	orders, k := r.servedWithOneRecord() // offset 0: seq 1 of no WAL
	r.commitAll(sent(k, 7, false, 2, 3))

	res := r.commitAll(sent(k, 7, true, 2, 3, 4))
	if slices.Sort(res.Seqs); !slices.Equal(res.Seqs, []uint64{2, 3, 4}) {
		t.Fatalf("answer's seqs: got %v, want [2 3 4]", res.Seqs)
	}
	want := []string{`"x"`, `"seq 2"`, `"seq 3"`, `"seq 4"`}
	if got := r.bodies(k); !slices.Equal(got, want) {
		t.Fatalf("records after a resend of 2 and 3 beside a new 4: got %q, want %q", got, want)
	}
	if got := r.alreadyCommitted.Get(); got != 2 {
		t.Fatalf("narad_commit_records_already_committed_total: got %d, want 2", got)
	}

	next := r.nextLife(t, orders, func(*Deps) {})
	next.commitAll(sent(k, 7, true, 2, 3, 4))
	if got := next.bodies(k); !slices.Equal(got, want) {
		t.Fatalf("records after the same resend in the next life: got %q, want %q", got, want)
	}

	// Another life of the WAL hands seqs out again: other records.
	next.commitAll(sent(k, 8, true, 2))
	// A record not flagged is never looked up.
	next.commitAll(sent(k, 7, false, 4))
	// A record of no known life is never found.
	next.commitAll(sent(k, 0, true, 3))
	want = append(want, `"seq 2"`, `"seq 4"`, `"seq 3"`)
	if got := next.bodies(k); !slices.Equal(got, want) {
		t.Fatalf("records after three commits that are no resend: got %q, want %q", got, want)
	}
}
