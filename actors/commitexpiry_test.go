package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// A commit whose sender stopped waiting (Commit.NotAfter passed) is
// refused unwritten: the sender sends its records again, and writing the
// first copy too would store them twice (issue 29's record at offset 1
// that was round 0's again). One still within its deadline is written.
func TestACommitPastItsDeadlineIsRefusedUnwritten(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("late", 3)
	topic, _ := tn.n.Store().Topic("late")
	k := messages.PartitionKey{Topic: "late", Incarnation: topic.Incarnation, Partition: 0}
	commit := func(notAfter time.Time, body string) *messages.CommitResult {
		t.Helper()
		c := &messages.Commit{Key: k, NotAfter: notAfter, Records: []messages.CommitRecord{{Seq: 1, Body: []byte(body)}}}
		res, err := tn.n.route.Local(context.Background(), k, c)
		if err != nil {
			t.Fatalf("commit %q: %v", body, err)
		}
		r, ok := res.(*messages.CommitResult)
		if !ok {
			t.Fatalf("commit %q: answered %T, want a CommitResult", body, res)
		}
		return r
	}
	if r := commit(time.Now().Add(-time.Millisecond), "expired"); r.Status != messages.StatusUnavailable || !strings.Contains(r.Err, "expired") {
		t.Fatalf("a commit past its deadline: got %v %q, want unavailable, expired", r.Status, r.Err)
	}
	if r := commit(time.Now().Add(time.Minute), "in time"); r.Status != messages.StatusOK {
		t.Fatalf("a commit within its deadline: got %v %q, want OK", r.Status, r.Err)
	}
	if r := commit(time.Time{}, "no deadline"); r.Status != messages.StatusOK {
		t.Fatalf("a commit without a deadline: got %v %q, want OK", r.Status, r.Err)
	}
	if got := tn.bodiesAt("late", topic.Incarnation, 0); strings.Join(got, ",") != "in time,no deadline" {
		t.Fatalf("partition 0's records: got %q, want the two commits in time only", got)
	}
	if got := tn.n.metrics.commitsExpired.Get(); got != 1 {
		t.Fatalf("commits expired: got %d, want 1", got)
	}
}
