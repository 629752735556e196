package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// rule P4: the source answers a listing at a higher HWM than the copy
// holds and is cut off before the chunks of that listing arrive. Those
// records were visible on the source, so the destination must not
// force-promote its copy below that HWM: past ForcePromoteAfter it blocks
// (source_dead_copy_behind), and once the source is back the move
// completes normally with every record.
func TestClusterRuleP4ACopyBehindTheLastListingIsNeverForcePromoted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	const first, more = 40, 40
	g := newGate("m", 0, false)
	g.skip.Store(1) // the first pass copies the first records; the second is held
	listed := make(chan int64, 1)
	cut := make(chan struct{})
	var once sync.Once
	onListed := func(ctx context.Context, k messages.PartitionKey, hwm int64) {
		if k.Topic != "m" || k.Partition != 0 || hwm <= first {
			return
		}
		hold := false
		once.Do(func() { listed <- hwm; hold = true })
		if !hold {
			return
		}
		// The listing has arrived; its chunks are read only once the
		// source is cut off.
		select {
		case <-cut:
		case <-ctx.Done():
		}
	}
	c := moveTestCluster(t, g, func(_ int, cfg *Config) {
		cfg.Move.ForcePromoteAfter = time.Second
		cfg.Move.CatchUpStopBytes = 0 // only a pass that copies nothing converges
		cfg.RequestTimeout = 500 * time.Millisecond
		cfg.faults.mover.Listed = onListed
	})
	// A loaded run can find the control plane still settling: retry a 503.
	if ok, _, problem := createUntilAnswered(c.node(0), "m"); !ok {
		t.Fatal(problem)
	}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			c.node(0).must(http.StatusAccepted, "POST", "/v1/topics/m/produce?partition=0", []byte(fmt.Sprintf(`"r%02d"`, i)))
		}
	}
	produce(0, first)
	dest := c.destinationFor("m", 0)
	c.waitFor(fmt.Sprintf("%d records committed at the owner", first), func() bool {
		_, hwm := ownersOf(t, c.node(dest), "m")
		return hwm == first
	})
	owner := c.planMove("m", 0, dest)
	<-g.reached // the first pass copied the first records
	produce(first, first+more)
	c.waitFor(fmt.Sprintf("%d records committed at the owner", first+more), func() bool {
		_, hwm := ownersOf(t, c.node(dest), "m")
		return hwm == first+more
	})
	g.release()
	select {
	case hwm := <-listed:
		if hwm != first+more {
			t.Fatalf("the second listing's HWM: got %d, want %d", hwm, first+more)
		}
	case <-time.After(clusterWaitBound):
		t.Fatal("timed out waiting for the second listing")
	}
	c.cutOff(owner, true)
	close(cut)

	ownerID, destID := fmt.Sprintf("n%d", owner+1), fmt.Sprintf("n%d", dest+1)
	var seen messages.MoveProgress
	c.waitFor("the move blocked on a copy behind the source's HWM, or promoted", func() bool {
		if c.assignmentOf(dest, "m", 0).Owner == destID {
			return true
		}
		seen = progressOn(c.node(dest), "m", 0)
		return slices.Contains(seen.Blocked, move.ReasonSourceDeadCopyBehind)
	})
	if a := c.assignmentOf(dest, "m", 0); a.Owner != ownerID {
		t.Fatalf("with the source cut off after listing HWM %d and a copy at %d: got owner %s, want %s (no force-promote below the listing)",
			first+more, first, a.Owner, ownerID)
	}
	if seen.Phase != move.CatchUp.String() {
		t.Fatalf("blocked move: got phase %s, want %s", seen.Phase, move.CatchUp)
	}

	c.cutOff(owner, false)
	c.waitForOwner(dest, "m", 0)
	wantRecords(c, dest, first+more)
	// Whether the install was a regular move or a promote depends on
	// whether the copy caught up before the source read alive again; either
	// way it is at the HWM the source had listed.
	marker, err := storage.ReadMarker(storage.PartitionPath(c.node(dest).cfg.DataDir, "m", 0))
	if err != nil || marker.PromotedHWM != first+more {
		t.Fatalf("move marker: got %+v (%v), want the copy installed at %d", marker, err, first+more)
	}
}

// progressOn is the destination's own report of topic/partition's move, as
// GET /v1/cluster/moves?detail=1 on that node answers it; the zero value
// when it has none.
func progressOn(tn *testNode, topic string, partition int) messages.MoveProgress {
	code, body, err := tn.attempt("GET", "/v1/cluster/moves?detail=1", nil)
	if err != nil || code != http.StatusOK {
		return messages.MoveProgress{}
	}
	var r messages.MoveList
	if json.Unmarshal(body, &r) != nil {
		return messages.MoveProgress{}
	}
	for _, mv := range r.Moves {
		if mv.Topic == topic && mv.Partition == partition && mv.Progress != nil {
			return *mv.Progress
		}
	}
	return messages.MoveProgress{}
}

// rule F9: a fence renews the freeze from when it was sent, on the
// worker's own clock, and only a freeze renewed within the last three
// quarters of its TTL is flipped on. A worker much older than the TTL still
// installs and flips on a fence answered in time; were the request's send
// time not carried back, it would fence again forever.
func TestClusterRuleF9AWorkerOlderThanTheFreezeTTLStillFlipsOnAFreshFence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	const ttl = time.Second
	g := newGate("m", 0, false)
	c := moveTestCluster(t, g, func(_ int, cfg *Config) { cfg.Move.FreezeTTL = ttl })
	if ok, _, problem := createUntilAnswered(c.node(0), "m"); !ok {
		t.Fatal(problem)
	}
	const records = 20
	for i := range records {
		c.node(0).must(http.StatusAccepted, "POST", "/v1/topics/m/produce?partition=0", []byte(fmt.Sprintf(`"r%02d"`, i)))
	}
	dest := c.destinationFor("m", 0)
	c.waitFor(fmt.Sprintf("%d records committed at the owner", records), func() bool {
		_, hwm := ownersOf(t, c.node(dest), "m")
		return hwm == records
	})
	c.planMove("m", 0, dest)
	<-g.reached // the first pass is held until the worker is old
	c.waitFor("the worker older than twice the freeze TTL", func() bool {
		return progressOn(c.node(dest), "m", 0).ElapsedMs > 2*ttl.Milliseconds()
	})
	g.release()
	c.waitForOwner(dest, "m", 0)
	wantRecords(c, dest, records)
}

// wantRecords fails the test unless node i serves partition 0 of topic m
// with the records r00, r01, ... up to n, from offset 0. The partition
// opens on the new owner a moment after its replica applies the flip.
func wantRecords(c *testCluster, i, n int) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("n%d serving m/0", i+1), func() bool {
		code, _, err := c.node(i).attempt("GET", "/v1/topics/m/consume?partition=0&offset=0", nil)
		return err == nil && code == http.StatusOK
	})
	for off := range n {
		m := c.node(i).consume("m", fmt.Sprintf("partition=0&offset=%d", off))
		if m == nil || string(m.Payload) != fmt.Sprintf(`"r%02d"`, off) {
			c.t.Fatalf("offset %d on the moved copy: got %+v, want r%02d", off, m, off)
		}
	}
}
