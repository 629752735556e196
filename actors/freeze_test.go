package actors

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// askPartition sends msg to partition 0 of topic on a single node.
func askPartition(t *testing.T, tn *testNode, topic string, msg any) any {
	t.Helper()
	tp, ok := tn.n.store.Topic(topic)
	if !ok {
		t.Fatalf("topic %s unknown", topic)
	}
	res, err := tn.n.ask(context.Background(), messages.PartitionKey{Topic: topic, Incarnation: tp.Incarnation, Partition: 0}, msg)
	if err != nil {
		t.Fatalf("%T: %v", msg, err)
	}
	return res
}

func handoff(t *testing.T, tn *testNode, h messages.Handoff) *messages.HandoffResult {
	t.Helper()
	return askPartition(t, tn, "f", &h).(*messages.HandoffResult)
}

// The source side of a move on one node (rules F1, F5, F6, F9, F12).
func TestHandoffFreezeOnTheSource(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.Move.FreezeTTL = 400 * time.Millisecond })
	tn.createTopic("f", 3)
	for range 3 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"x"`))
	}
	waitFor(t, func() bool {
		ls := askPartition(t, tn, "f", &messages.ListPartition{}).(*messages.PartitionListing)
		return ls.HWM == 3
	})

	// rule F5: a prepare arms a freeze and returns a token with the listing.
	r := handoff(t, tn, messages.Handoff{Op: messages.HandoffPrepare})
	if r.Status != messages.StatusOK || r.Token == "" || r.Listing == nil || r.Listing.HWM != 3 {
		t.Fatalf("prepare: got %+v, want a token and a listing at HWM 3", r)
	}
	token := r.Token

	// rule F1: commits are refused while frozen (the dispatcher keeps
	// them: produce still answers 202) and consume pauses on it.
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"held"`))
	time.Sleep(150 * time.Millisecond)
	if ls := askPartition(t, tn, "f", &messages.ListPartition{}).(*messages.PartitionListing); ls.HWM != 3 {
		t.Fatalf("HWM while frozen: got %d, want 3 (commits refused)", ls.HWM)
	}
	if m := tn.consume("f", "partition=0&wait=0"); m != nil {
		t.Fatalf("consume while frozen: got offset %d, want nothing", m.Offset)
	}

	// rule F6: a re-arm extends the freeze its token names; another token
	// is refused.
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffRearm, Token: token}); r.Status != messages.StatusOK {
		t.Fatalf("re-arm: got %+v, want OK", r)
	}
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffRearm, Token: "other"}); r.Status != messages.StatusGone {
		t.Fatalf("re-arm with a wrong token: got %+v, want gone (409)", r)
	}
	// rule F9: the fence checks the HWM too.
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffFence, Token: token, HWM: 2}); r.Status != messages.StatusGone {
		t.Fatalf("fence with another HWM: got %+v, want gone (409)", r)
	}
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffFence, Token: token, HWM: 3}); r.Status != messages.StatusOK {
		t.Fatalf("fence: got %+v, want OK", r)
	}

	// rules F9, F12: unattended, the freeze lapses on its TTL; the fence
	// then refuses, and the held record lands.
	time.Sleep(500 * time.Millisecond)
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffFence, Token: token, HWM: 3}); r.Status != messages.StatusGone {
		t.Fatalf("fence after the TTL: got %+v, want gone (409)", r)
	}
	waitFor(t, func() bool {
		return askPartition(t, tn, "f", &messages.ListPartition{}).(*messages.PartitionListing).HWM == 4
	})
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffRearm, Token: token}); r.Status != messages.StatusGone {
		t.Fatalf("re-arm after the lapse: got %+v, want gone: a token never arms a new freeze", r)
	}
}

// rule C4: chunk reads return committed bytes only, within the listing.
func TestTransferChunksStayWithinTheListing(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("f", 3)
	for range 5 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"abcdefgh"`))
	}
	var ls *messages.PartitionListing
	waitFor(t, func() bool {
		ls = askPartition(t, tn, "f", &messages.ListPartition{}).(*messages.PartitionListing)
		return ls.HWM == 5
	})
	if len(ls.Segments) != 1 || ls.Position.Frontier != -1 {
		t.Fatalf("listing: got %+v, want one segment and nothing acked", ls)
	}
	seg := ls.Segments[0]
	var got int64
	for {
		ch := askPartition(t, tn, "f", &messages.ReadChunk{Segment: seg.Name, Pos: got, Max: 37}).(*messages.Chunk)
		if ch.Status != messages.StatusOK {
			t.Fatalf("chunk at %d: got %+v", got, ch)
		}
		if len(ch.Data) == 0 {
			break
		}
		if len(ch.Data) > 37 {
			t.Fatalf("chunk at %d: got %d bytes, want at most 37", got, len(ch.Data))
		}
		got += int64(len(ch.Data))
	}
	if got != seg.Size {
		t.Fatalf("chunks: got %d bytes, want the listed %d", got, seg.Size)
	}
}
