package sweeper

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// rule S8, rule S7
func TestQuarantineBookSetsTheGaugesFromTheInventory(t *testing.T) {
	dir := t.TempDir()
	want := seedSetAside(t, dir)
	m := newTestMetrics()
	b := newBook(m)
	if s := b.snapshot(); s.taken {
		t.Fatalf("before a refresh: got %+v, want nothing taken", s)
	}
	if err := b.refresh(dir); err != nil {
		t.Fatal(err)
	}
	s := b.snapshot()
	if !s.taken || len(s.copies) != 3 || s.bytes != want || !reflect.DeepEqual(s.orphans, []string{"topics/orphan"}) {
		t.Fatalf("snapshot: got %+v, want 3 copies of %d bytes and topics/orphan", s, want)
	}
	if got := [3]float64{m.QuarantinedCopies.Get(), m.QuarantinedBytes.Get(), m.OrphanTopicDirs.Get()}; got != [3]float64{3, float64(want), 1} {
		t.Fatalf("gauges copies, bytes, orphans: got %v, want [3 %d 1]", got, want)
	}
	if err := storage.ReleaseQuarantined(dir, ".stale/old@3"); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(dir); err != nil {
		t.Fatal(err)
	}
	if got := [2]float64{m.QuarantinedCopies.Get(), m.QuarantinedBytes.Get()}; got != [2]float64{2, float64(want - 50)} {
		t.Fatalf("gauges after a release: got %v, want [2 %d]", got, want-50)
	}
	b.reclaimed(4096)
	b.reclaimed(10)
	if got := b.reclaimedBytes(); got != 4106 {
		t.Fatalf("reclaimed: got %d, want 4106", got)
	}
}

// The sweeper owns the book: passes, fresh listings, counts and a release
// all reach it as messages while each other runs (run under -race), and a
// release is answered once the book no longer lists what it released.
func TestTheSweeperOwnsTheQuarantineBook(t *testing.T) {
	r := newSweepRig(t)
	want := seedSetAside(t, r.d.DataDir)
	// The leader cannot be asked: the passes leave the deleted topic's
	// directories, set aside here, where they are.
	r.replica.leaderErr = errOwnerUnreachable
	system, pid := r.sweeperPID()
	ask := func(msg any) any {
		res, err := system.Root.RequestFuture(pid, msg, 10*time.Second).Result()
		if err != nil {
			t.Error(err)
		}
		return res
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				system.Root.Send(pid, Due{})
				l := ask(QuarantineAsk{Fresh: true}).(QuarantineListAnswer)
				if l.Err != nil || l.List.TotalBytes != want || l.List.TotalCopies != 3 {
					t.Errorf("fresh listing: got %d copies of %d bytes (%v), want 3 of %d", l.List.TotalCopies, l.List.TotalBytes, l.Err, want)
				}
				if c := ask(QuarantineAsk{}).(QuarantineCountsAnswer); !c.Taken || c.Counts.QuarantinedBytes != want {
					t.Errorf("counts after a listing: got %+v, want %d bytes taken", c, want)
				}
			}
		})
	}
	wg.Wait()
	rel := ask(QuarantineRelease{Req: messages.QuarantineReleaseRequest{Path: ".stale/old@3"}}).(QuarantineReleaseAnswer)
	if rel.Err != nil || !rel.Reply.Released || rel.Reply.Bytes != 50 {
		t.Fatalf("release: got %+v, %v; want 50 bytes released", rel.Reply, rel.Err)
	}
	if c := ask(QuarantineAsk{}).(QuarantineCountsAnswer); c.Counts.QuarantinedBytes != want-50 {
		t.Fatalf("counts right after the release: got %d bytes, want %d", c.Counts.QuarantinedBytes, want-50)
	}
	if got := r.metrics.QuarantinedBytes.Get(); got != float64(want-50) {
		t.Fatalf("gauge after the release: got %v, want %d", got, want-50)
	}
	bad := ask(QuarantineRelease{Req: messages.QuarantineReleaseRequest{Path: "topics/orphan"}}).(QuarantineReleaseAnswer)
	if re, ok := errors.AsType[*transport.RemoteError](bad.Err); !ok || re.Status != 400 {
		t.Fatalf("release of an orphan: got %v, want 400", bad.Err)
	}
}

// Asks past QuarantineAsksMax answer 503 at once rather than queue.
func TestQuarantineAsksAreBounded(t *testing.T) {
	r := newSweepRig(t, func(c *Config) { c.QuarantineAsksMax = 1 })
	r.s.walking = true // a walk under way holds the one slot's ask
	r.s.thisWalk = []bookWaiter{{}}
	system, pid := r.sweeperPID()
	res, err := system.Root.RequestFuture(pid, QuarantineAsk{Fresh: true}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if re, ok := errors.AsType[*transport.RemoteError](res.(QuarantineListAnswer).Err); !ok || re.Status != transport.StatusUnavailable {
		t.Fatalf("an ask past the bound: got %v, want 503", res.(QuarantineListAnswer).Err)
	}
}

// Stopping the sweeper ends a pass under way and waits for it: Node.Stop
// stops it before the stores close, so no pass outlives them.
func TestStoppingTheSweeperWaitsForItsPass(t *testing.T) {
	r := newSweepRig(t)
	r.topic(sweepOrders, "n2")
	r.copyOf(sweepOrders0, 3)
	asked, returned := make(chan struct{}), make(chan struct{})
	r.owners.onAsk = func(messages.PartitionKey) {
		close(asked)
		<-r.s.stopped.Done() // the owner answers only once the sweeper is told to stop
		time.Sleep(50 * time.Millisecond)
		close(returned)
	}
	system := newTestSystem(t)
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return r.s }), Name)
	if err != nil {
		t.Fatal(err)
	}
	defer system.Shutdown()
	system.Root.Send(pid, Due{})
	<-asked
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-returned:
	default:
		t.Fatalf("the sweeper stopped while its pass was still asking an owner, want the pass ended first")
	}
}

// rule S8: every copy set aside is listed at error at startup, one line
// each with its path, kind, bytes and age, and one summary line.
func TestEveryCopySetAsideIsLoggedAtErrorAtStart(t *testing.T) {
	dir := t.TempDir()
	want := seedSetAside(t, dir)
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{".stale/old@3", ".stale/old@3/0", ".stale/old@3/0/00000.log"} {
		if err := os.Chtimes(filepath.Join(dir, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	h := &recordingHandler{}
	b := TakeQuarantineAtStart(slog.New(h), clock.Wall{}, dir, newTestMetrics())
	if s := b.snapshot(); len(s.copies) != 3 {
		t.Fatalf("book: got %d copies, want 3", len(s.copies))
	}
	byPath := map[string]map[string]string{}
	var summaries []map[string]string
	for _, r := range h.records {
		a := recordAttrs(r)
		switch {
		case r.Level != slog.LevelError:
			t.Errorf("got %v %q, want every line at error", r.Level, r.Message)
		case a["path"] != "":
			byPath[a["path"]] = a
		default:
			summaries = append(summaries, a)
		}
	}
	for path, kind := range map[string]string{"topics/gone/0.quarantine": "partition", ".stale/old@3": "stale_topic", ".moves/gone-1.quarantine": "staging"} {
		a, ok := byPath[path]
		if !ok {
			t.Errorf("%s: no line at error; got %v", path, byPath)
			continue
		}
		if a["kind"] != kind || a["bytes"] == "" || a["age"] == "" {
			t.Errorf("%s: got %v, want kind %s, bytes and age", path, a, kind)
		}
	}
	if a := byPath[".stale/old@3"]; a["age"] != "2h0m0s" || a["bytes"] != "50" {
		t.Errorf(".stale/old@3: got age %s and %s bytes, want 2h0m0s and 50", a["age"], a["bytes"])
	}
	if len(byPath) != 3 || len(summaries) != 1 {
		t.Fatalf("got %d copy lines and %d summaries, want 3 and 1", len(byPath), len(summaries))
	}
	if s := summaries[0]; s["copies"] != "3" || s["bytes"] != fmt.Sprint(want) || s["orphan_topic_dirs"] != "1" {
		t.Errorf("summary: got %v, want 3 copies, %d bytes, 1 orphan", s, want)
	}

	// Nothing set aside: one line, not at error.
	h = &recordingHandler{}
	TakeQuarantineAtStart(slog.New(h), clock.Wall{}, t.TempDir(), newTestMetrics())
	if len(h.records) != 1 || h.records[0].Level != slog.LevelInfo {
		t.Fatalf("an empty data dir: got %d lines, want one at info", len(h.records))
	}
}

func TestNodeQuarantineListsAtMostTheBoundAndCountsEverything(t *testing.T) {
	now := time.Unix(1700000000, 0)
	c := func(p string, b int64) storage.QuarantinedCopy {
		return storage.QuarantinedCopy{Path: p, Kind: storage.KindPartition, Topic: "t", Partition: 0, Bytes: b, Modified: now.Add(-time.Minute)}
	}
	s := inventory{taken: true, copies: []storage.QuarantinedCopy{c("a", 1), c("b", 2), c("c", 3)}, orphans: []string{"topics/x", "topics/y"}, bytes: 6}
	for _, tc := range []struct {
		limit   int
		copies  int
		orphans int
	}{{1, 1, 1}, {2, 2, 2}, {5, 3, 2}} {
		got := nodeQuarantineOf("n1", s, 9, tc.limit, now)
		if len(got.Copies) != tc.copies || len(got.OrphanTopicDirs) != tc.orphans || got.TotalCopies != 3 || got.TotalBytes != 6 || got.ReclaimedBytes != 9 {
			t.Errorf("limit %d: got %d copies, %d orphans, totals %d/%d, reclaimed %d; want %d, %d, 3/6, 9",
				tc.limit, len(got.Copies), len(got.OrphanTopicDirs), got.TotalCopies, got.TotalBytes, got.ReclaimedBytes, tc.copies, tc.orphans)
		}
	}
	got := nodeQuarantineOf("n1", s, 0, 1, now).Copies[0]
	want := messages.QuarantinedCopy{Path: "a", Kind: "partition", Topic: "t", Bytes: 1, ModifiedMs: now.Add(-time.Minute).UnixMilli(), AgeMs: 60000}
	if got != want {
		t.Errorf("copy: got %+v, want %+v", got, want)
	}
}
