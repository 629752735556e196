package route

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// One group carries many partitions' commits to their owner, and each is
// judged alone: the records of every partition the owner serves are
// committed there, and a partition it does not serve fails alone, as
// surely not processed (its records stay with the dispatcher). The same in
// the binary form (the commits service) and in the JSON one, which a peer
// older than issue 45 serves alone.
func TestACommitGroupCommitsEachPartitionAlone(t *testing.T) {
	for _, form := range []struct {
		name string
		post func(r *Router) func(string, []messages.PartitionRequest) (messages.MoveGroupReply, error)
	}{
		{"binary", func(r *Router) func(string, []messages.PartitionRequest) (messages.MoveGroupReply, error) {
			return r.commits
		}},
		{"json", func(r *Router) func(string, []messages.PartitionRequest) (messages.MoveGroupReply, error) {
			return r.commitGroup
		}},
	} {
		t.Run(form.name, func(t *testing.T) {
			r := newGroupRig(t, 6)
			router := r.g.r
			cg := newCommitGroups(router, rigGroups, nil)
			cg.post = form.post(router)
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
				st, err := router.Ask(context.Background(), c.req.Key, &messages.GetStats{})
				if err != nil {
					t.Fatal(err)
				}
				if hwm := st.(*messages.PartitionStats).HighWatermark; hwm != 2 {
					t.Fatalf("partition %d's high watermark after the group: got %d, want 2", p, hwm)
				}
			}
		})
	}
}

// A peer older than issue 45 refuses the binary form as malformed (400);
// the group goes again at once in the JSON form, and so do the next ones
// to that peer, without the binary form tried first.
func TestACommitGroupFallsBackToTheJSONFormForAnOlderPeer(t *testing.T) {
	r := newGroupRig(t, 3)
	old, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: "n3", URLs: []string{r.ns}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.Close)
	var refused, answered atomic.Int32
	err = old.Handle(commitGroupService, func(_ context.Context, _ string, body []byte) ([]byte, error) {
		items, err := messages.DecodeCommitGroup(body) // what a node older than issue 45 runs
		if err != nil {
			refused.Add(1)
			return nil, transport.Errorf(transport.StatusBadRequest, "commit group: %v", err)
		}
		answered.Add(1)
		out := messages.MoveGroupReply{}
		for _, it := range items {
			out.Items = append(out.Items, messages.MoveGroupItem{Reply: messages.PartitionReply{Commit: &messages.CommitResult{Key: it.Key, Seqs: []uint64{it.Commit.Records[0].Seq}}}})
		}
		return json.Marshal(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	cg := newCommitGroups(r.g.r, rigGroups, nil)
	for i := range 2 {
		c := &messages.Commit{Key: r.key(0), Records: []messages.CommitRecord{{Seq: uint64(7 + i), Body: []byte("x")}}}
		call := &groupCall{ctx: context.Background(), req: requestOf(r.key(0), c), done: make(chan struct{})}
		cg.carry("n3", []*groupCall{call})
		<-call.done
		if call.err != nil || call.rep.Commit == nil || call.rep.Commit.Status != messages.StatusOK {
			t.Fatalf("group %d to a peer older than the binary form: got %+v (%v), want its answer", i, call.rep, call.err)
		}
	}
	if refused.Load() != 1 || answered.Load() != 2 {
		t.Fatalf("the older peer refused %d groups and answered %d, want 1 refused (the first, binary) and 2 answered", refused.Load(), answered.Load())
	}
}

// Commits to a peer go through the commit groups; a commit to a partition
// of this node, and any other request, go as before.
func TestOnlyCommitsToAPeerTravelInCommitGroups(t *testing.T) {
	r := newGroupRig(t, 3)
	m := newGroupMetrics()
	o := NewGroupedOwners(r.g.r, rigGroups, m)
	c := &messages.Commit{Key: r.key(0), Records: []messages.CommitRecord{{Seq: 1, Body: []byte("x")}}}
	if _, err := o.Ask(context.Background(), r.key(0), c); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Ask(context.Background(), r.key(0), &messages.GetStats{}); err != nil {
		t.Fatal(err)
	}
	if got, items := m.CommitGroups.Get(), m.CommitGroupItems.Get(); got != 1 || items != 1 {
		t.Fatalf("commit groups sent: got %d carrying %d, want 1 carrying the one commit", got, items)
	}
}
