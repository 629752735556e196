package actors

import (
	"context"
	"testing"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// One group carries many partitions' commits to their owner, and each is
// judged alone: the records of every partition the owner serves are
// committed there, and a partition it does not serve fails alone, as
// surely not processed (its records stay with the dispatcher).
func TestACommitGroupCommitsEachPartitionAlone(t *testing.T) {
	r := newGroupRig(t, 6)
	router := r.g.r
	cg := newCommitGroups(router, DefaultConfig(), nil)
	var calls []*groupCall
	for i, p := range []int{0, 1, 2, 6, 3, 4, 5} { // 6 has no actor on n1
		c := &messages.Commit{Key: r.key(p), Records: []messages.CommitRecord{
			{Seq: uint64(10 * i), Key: []byte("k"), Body: []byte("first")},
			{Seq: uint64(10*i + 1), Key: []byte("k"), Body: []byte("second")},
		}}
		calls = append(calls, &groupCall{ctx: context.Background(), req: requestOf(r.key(p), c), done: make(chan struct{})})
	}
	cg.carry("n1", calls)
	for _, c := range calls {
		<-c.done
		p := c.req.Key.Partition
		if p == 6 {
			if c.err == nil || !transport.NotProcessed(c.err) {
				t.Fatalf("partition 6, not served by n1: got %v, want an error that proves it was not processed", c.err)
			}
			continue
		}
		res, err := replyOf(c.rep, c.req.Commit, c.req.Key, "n1")
		if c.err != nil || err != nil {
			t.Fatalf("partition %d: got %v / %v, want its commit's result", p, c.err, err)
		}
		if cr := res.(*messages.CommitResult); cr.Status != messages.StatusOK || len(cr.Seqs) != 2 || cr.Seqs[0] != c.req.Commit.Records[0].Seq {
			t.Fatalf("partition %d: got %+v, want OK for both its records", p, cr)
		}
		st, err := router.ask(context.Background(), c.req.Key, &messages.GetStats{})
		if err != nil {
			t.Fatal(err)
		}
		if hwm := st.(*messages.PartitionStats).HighWatermark; hwm != 2 {
			t.Fatalf("partition %d's high watermark after the group: got %d, want 2", p, hwm)
		}
	}
}

// Commits to a peer go through the commit groups; a commit to a partition
// of this node, and any other request, go as before.
func TestOnlyCommitsToAPeerTravelInCommitGroups(t *testing.T) {
	r := newGroupRig(t, 3)
	m := newNodeMetrics("rig-" + t.Name())
	o := groupedOwners{r.g.r, newCommitGroups(r.g.r, DefaultConfig(), m)}
	c := &messages.Commit{Key: r.key(0), Records: []messages.CommitRecord{{Seq: 1, Body: []byte("x")}}}
	if _, err := o.ask(context.Background(), r.key(0), c); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ask(context.Background(), r.key(0), &messages.GetStats{}); err != nil {
		t.Fatal(err)
	}
	if got, items := m.commitGroups.Get(), m.commitGroupItems.Get(); got != 1 || items != 1 {
		t.Fatalf("commit groups sent: got %d carrying %d, want 1 carrying the one commit", got, items)
	}
}
