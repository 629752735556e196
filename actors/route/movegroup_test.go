package route

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// One group carries many partitions' listings, and each answer is its own:
// a partition the source does not serve fails alone, as surely not
// processed, beside the listings of those it serves.
func TestAMoveGroupAnswersEachPartitionAlone(t *testing.T) {
	r := newGroupRig(t, 6)
	calls := r.calls(0, 1, 2, 6, 3, 4, 5) // 6 has no actor on n1
	r.g.carry("n1", calls)
	for i, c := range calls {
		<-c.done
		p := c.req.Key.Partition
		if p == 6 {
			if c.err == nil || !transport.NotProcessed(c.err) {
				t.Fatalf("partition 6, not served by n1: got %v, want an error that proves it was not processed", c.err)
			}
			continue
		}
		ls, err := replyOf(c.rep, &messages.ListPartition{}, c.req.Key, "n1")
		if c.err != nil || err != nil {
			t.Fatalf("item %d (partition %d): got %v / %v, want its listing", i, p, c.err, err)
		}
		if l, ok := ls.(*messages.PartitionListing); !ok || l.Status != messages.StatusOK {
			t.Fatalf("item %d (partition %d): got %+v, want an OK listing", i, p, ls)
		}
	}
}

// A lane sends what waits in groups of at most MoveGroupMaxItems, and a
// fence or re-arm travels in a group like a listing; a prepare never does.
func TestALaneSendsWhatWaitsInGroupsOfTheMaximum(t *testing.T) {
	r := newGroupRig(t, 9)
	r.g.maxItems = 4
	r.g.metrics = newGroupMetrics()
	parts := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	lane := &groupLane{waiting: r.calls(parts...), sending: 1}
	// A fence with a token the source never gave: answered 409, in place.
	fence := &messages.Handoff{Op: messages.HandoffFence, Token: "none", HWM: 1}
	fc := &groupCall{ctx: context.Background(), req: requestOf(r.key(0), fence), done: make(chan struct{})}
	lane.waiting = append(lane.waiting, fc)
	r.g.lanes["n1"] = lane
	r.g.send("n1", lane)
	if got := r.g.metrics.MoveGroups.Get(); got != 3 {
		t.Fatalf("groups for 10 requests of at most 4: got %d, want 3", got)
	}
	if got := r.g.metrics.MoveGroupItems.Get(); got != 10 {
		t.Fatalf("requests carried: got %d, want 10", got)
	}
	if _, left := r.g.lanes["n1"]; left {
		t.Fatal("the lane after its last sender ended: got it kept, want it gone")
	}
	<-fc.done
	if res, err := replyOf(fc.rep, fence, fc.req.Key, "n1"); fc.err != nil || err != nil || res.(*messages.HandoffResult).Status != messages.StatusGone {
		t.Fatalf("fence of an unknown token: got %+v (%v, %v), want 409 (gone)", res, fc.err, err)
	}
	for _, tc := range []struct {
		req  messages.PartitionRequest
		want bool
	}{
		{messages.PartitionRequest{List: &messages.ListPartition{}}, true},
		{messages.PartitionRequest{Handoff: &messages.Handoff{Op: messages.HandoffRelease}}, true},
		{messages.PartitionRequest{Handoff: &messages.Handoff{Op: messages.HandoffPrepare}}, false},
		{messages.PartitionRequest{Stats: &messages.GetStats{}}, false},
		{messages.PartitionRequest{List: &messages.ListPartition{}, Stats: &messages.GetStats{}}, false},
	} {
		if got := tc.req.Groupable(); got != tc.want {
			t.Fatalf("Groupable(%+v): got %v, want %v", tc.req, got, tc.want)
		}
	}
}

// Through ask, concurrent workers' listings arrive whole, fewer groups
// than requests carry them, and a source that serves no groups (an older
// binary) still answers each request alone.
func TestMoveGroupsCarryConcurrentAsksAndFallBackToSingleRequests(t *testing.T) {
	r := newGroupRig(t, 8)
	r.g.metrics = newGroupMetrics()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for p := range 8 {
		wg.Go(func() {
			res, err := r.g.ask(context.Background(), r.key(p), &messages.ListPartition{})
			if err == nil {
				if l, ok := res.(*messages.PartitionListing); !ok || l.Status != messages.StatusOK {
					err = fmt.Errorf("got %+v, want an OK listing", res)
				}
			}
			errs[p] = err
		})
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
	if got := r.g.metrics.MoveGroupItems.Get(); got != 8 {
		t.Fatalf("requests carried in groups: got %d, want 8", got)
	}
	// A request under a freeze goes alone.
	if res, err := r.g.ask(alone(context.Background()), r.key(0), &messages.ListPartition{}); err != nil || res.(*messages.PartitionListing).Status != messages.StatusOK {
		t.Fatalf("a listing alone: got %+v, %v; want an OK listing", res, err)
	}
	if got := r.g.metrics.MoveGroupItems.Get(); got != 8 {
		t.Fatalf("requests carried in groups after one alone: got %d, want still 8", got)
	}

	// An "old" node serves partition requests but no groups.
	old, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: "old", URLs: []string{r.ns}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Handle(PartitionService, func(_ context.Context, _ string, body []byte) ([]byte, error) {
		return messages.EncodePartitionReply(messages.PartitionReply{Listing: &messages.PartitionListing{Status: messages.StatusOK, HWM: 7}})
	}); err != nil {
		t.Fatal(err)
	}
	calls := r.calls(0, 1)
	r.g.carry("old", calls)
	for _, c := range calls {
		<-c.done
		if c.err != nil || c.rep.Listing == nil || c.rep.Listing.HWM != 7 {
			t.Fatalf("a request to a node without groups: got %+v (%v), want its own answer, HWM 7", c.rep, c.err)
		}
	}
}

// A source answers a group once every item answered or waited
// MoveGroupWaitFor (GroupWait): an item past it answers 504 (unknown), in its place.
func TestASourceAnswersAnItemPastTheGroupWaitAsUnknown(t *testing.T) {
	r := newGroupRig(t, 3)
	body, err := json.Marshal(messages.MoveGroup{Items: []messages.PartitionRequest{requestOf(r.key(0), &messages.ListPartition{}), requestOf(r.key(1), &messages.ListPartition{})}})
	if err != nil {
		t.Fatal(err)
	}
	src := r.src
	src.GroupWait = time.Nanosecond // every item is past it at once
	raw, err := src.serveMoveGroup(context.Background(), "n2", body)
	if err != nil {
		t.Fatal(err)
	}
	var out messages.MoveGroupReply
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 2 {
		t.Fatalf("answers: got %d, want 2", len(out.Items))
	}
	for i, it := range out.Items {
		if it.Status != transport.StatusTimeout || it.Reply.Listing != nil {
			t.Fatalf("item %d: got status %d with listing %v, want 504 and none", i, it.Status, it.Reply.Listing != nil)
		}
	}
	// A group of something else than move requests is refused whole.
	bad, _ := json.Marshal(messages.MoveGroup{Items: []messages.PartitionRequest{{Key: r.key(0), Stats: &messages.GetStats{}}}})
	if _, err := src.serveMoveGroup(context.Background(), "n2", bad); err == nil {
		t.Fatal("a group of a stats request: got an answer, want it refused")
	}
}
