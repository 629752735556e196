package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// seedSetAside writes copies set aside (and live data beside them) into a
// data dir as earlier runs of a node would have left them; it returns the
// bytes set aside.
func seedSetAside(t testing.TB, dataDir string) int64 {
	t.Helper()
	files := map[string]int{
		"topics/gone/incarnation":              2,
		"topics/gone/0.quarantine/00000.log":   100,
		"topics/gone/0.quarantine/consumer":    24,
		".stale/old@3/0/00000.log":             50,
		".moves/gone-1.quarantine/00000.log":   26,
		"topics/orphan/0/00000.log":            7, // no marker: an orphan, not a copy
		"topics/gone/0.quarantine.x/00000.log": 1, // not a name a set-aside takes
	}
	for rel, size := range files {
		p := filepath.Join(dataDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return 100 + 24 + 50 + 26
}

// rule S8, rule S7
func TestQuarantineBookSetsTheGaugesFromTheInventory(t *testing.T) {
	dir := t.TempDir()
	want := seedSetAside(t, dir)
	m := newNodeMetrics(t.Name())
	b := newQuarantineBook(m)
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
	if got := [3]float64{m.quarantinedCopies.Get(), m.quarantinedBytes.Get(), m.orphanTopicDirs.Get()}; got != [3]float64{3, float64(want), 1} {
		t.Fatalf("gauges copies, bytes, orphans: got %v, want [3 %d 1]", got, want)
	}
	if err := storage.ReleaseQuarantined(dir, ".stale/old@3"); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(dir); err != nil {
		t.Fatal(err)
	}
	if got := [2]float64{m.quarantinedCopies.Get(), m.quarantinedBytes.Get()}; got != [2]float64{2, float64(want - 50)} {
		t.Fatalf("gauges after a release: got %v, want [2 %d]", got, want-50)
	}
	b.reclaimed(4096)
	b.reclaimed(10)
	if got := b.reclaimedBytes(); got != 4106 {
		t.Fatalf("reclaimed: got %d, want 4106", got)
	}
}

// sweeperPID spawns the rig's sweeper in an actor system of its own;
// the test's end stops it and waits.
func (r *sweepRig) sweeperPID() (*actor.ActorSystem, *actor.PID) {
	r.t.Helper()
	system := newTestSystem(r.t)
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return r.s }), sweeperName)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		_ = system.Root.StopFuture(pid).Wait()
		system.Shutdown()
	})
	return system, pid
}

// The sweeper owns the book: passes, fresh listings, counts and a release
// all reach it as messages while each other runs (run under -race), and a
// release is answered once the book no longer lists what it released.
func TestTheSweeperOwnsTheQuarantineBook(t *testing.T) {
	r := newSweepRig(t)
	want := seedSetAside(t, r.cfg.DataDir)
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
				system.Root.Send(pid, sweepDue{})
				l := ask(quarantineAsk{fresh: true}).(quarantineListAnswer)
				if l.err != nil || l.list.TotalBytes != want || l.list.TotalCopies != 3 {
					t.Errorf("fresh listing: got %d copies of %d bytes (%v), want 3 of %d", l.list.TotalCopies, l.list.TotalBytes, l.err, want)
				}
				if c := ask(quarantineAsk{}).(quarantineCountsAnswer); !c.taken || c.counts.QuarantinedBytes != want {
					t.Errorf("counts after a listing: got %+v, want %d bytes taken", c, want)
				}
			}
		})
	}
	wg.Wait()
	rel := ask(quarantineRelease{req: messages.QuarantineReleaseRequest{Path: ".stale/old@3"}}).(quarantineReleaseAnswer)
	if rel.err != nil || !rel.reply.Released || rel.reply.Bytes != 50 {
		t.Fatalf("release: got %+v, %v; want 50 bytes released", rel.reply, rel.err)
	}
	if c := ask(quarantineAsk{}).(quarantineCountsAnswer); c.counts.QuarantinedBytes != want-50 {
		t.Fatalf("counts right after the release: got %d bytes, want %d", c.counts.QuarantinedBytes, want-50)
	}
	if got := r.metrics.quarantinedBytes.Get(); got != float64(want-50) {
		t.Fatalf("gauge after the release: got %v, want %d", got, want-50)
	}
	bad := ask(quarantineRelease{req: messages.QuarantineReleaseRequest{Path: "topics/orphan"}}).(quarantineReleaseAnswer)
	if re, ok := errors.AsType[*transport.RemoteError](bad.err); !ok || re.Status != 400 {
		t.Fatalf("release of an orphan: got %v, want 400", bad.err)
	}
}

// Asks past QuarantineAsksMax answer 503 at once rather than queue.
func TestQuarantineAsksAreBounded(t *testing.T) {
	r := newSweepRig(t, func(c *Config) { c.QuarantineAsksMax = 1 })
	r.s.walking = true // a walk under way holds the one slot's ask
	r.s.thisWalk = []bookWaiter{{}}
	system, pid := r.sweeperPID()
	res, err := system.Root.RequestFuture(pid, quarantineAsk{fresh: true}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if re, ok := errors.AsType[*transport.RemoteError](res.(quarantineListAnswer).err); !ok || re.Status != transport.StatusUnavailable {
		t.Fatalf("an ask past the bound: got %v, want 503", res.(quarantineListAnswer).err)
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
		<-r.s.stop // the owner answers only once the sweeper is told to stop
		time.Sleep(50 * time.Millisecond)
		close(returned)
	}
	system := newTestSystem(t)
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return r.s }), sweeperName)
	if err != nil {
		t.Fatal(err)
	}
	defer system.Shutdown()
	system.Root.Send(pid, sweepDue{})
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

func recordAttrs(r slog.Record) map[string]string {
	out := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { out[a.Key] = a.Value.String(); return true })
	return out
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
	b := takeQuarantineAtStart(slog.New(h), dir, newNodeMetrics(t.Name()))
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
	takeQuarantineAtStart(slog.New(h), t.TempDir(), newNodeMetrics(t.Name()+"/empty"))
	if len(h.records) != 1 || h.records[0].Level != slog.LevelInfo {
		t.Fatalf("an empty data dir: got %d lines, want one at info", len(h.records))
	}
}

func TestNodeQuarantineListsAtMostTheBoundAndCountsEverything(t *testing.T) {
	now := time.Unix(1700000000, 0)
	c := func(p string, b int64) storage.QuarantinedCopy {
		return storage.QuarantinedCopy{Path: p, Kind: storage.KindPartition, Topic: "t", Partition: 0, Bytes: b, Modified: now.Add(-time.Minute)}
	}
	s := quarantineSnapshot{taken: true, copies: []storage.QuarantinedCopy{c("a", 1), c("b", 2), c("c", 3)}, orphans: []string{"topics/x", "topics/y"}, bytes: 6}
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

// adminAsk sends one admin request over plain NATS and decodes the answer;
// an error reply comes back as the status it carries.
func adminAsk(t *testing.T, nc *nats.Conn, verb string, in, out any) (status string) {
	t.Helper()
	body, _ := json.Marshal(in)
	msg, err := nc.Request("narad.test.admin."+verb, body, 10*time.Second)
	if err != nil {
		t.Fatalf("admin %s: %v", verb, err)
	}
	if st := msg.Header.Get(messages.HeaderStatus); st != "" {
		return st
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		t.Fatalf("admin %s body %s: %v", verb, msg.Data, err)
	}
	return ""
}

// rule S8: a node started on a data dir with copies set aside counts them
// in its gauges before it serves, lists them over the "quarantine" verb,
// and releases one only when an operator names it exactly. rule S7: the
// startup sweep removed the topic directory without a marker first.
func TestQuarantineVerbsListAndReleaseTheCopiesSetAside(t *testing.T) {
	ns := startTestNATS(t)
	var seeded int64
	tn := newTestNode(t, func(c *Config) {
		c.NATSURL, c.Cluster = ns.ClientURL(), "test"
		seeded = seedSetAside(t, c.DataDir)
	})
	if got := [3]float64{tn.n.metrics.quarantinedCopies.Get(), tn.n.metrics.quarantinedBytes.Get(), tn.n.metrics.orphanTopicDirs.Get()}; got != [3]float64{3, float64(seeded), 0} {
		t.Fatalf("gauges after start: got %v, want [3 %d 0]", got, seeded)
	}
	if _, err := os.Stat(filepath.Join(tn.n.cfg.DataDir, "topics", "orphan")); !os.IsNotExist(err) {
		t.Fatalf("the topic directory without a marker after start: got %v, want it removed by the startup sweep", err)
	}
	tn.createTopic("t", 3)
	// The partitions open after the create answers: wait for the one the
	// refused releases must leave alone.
	waitFor(t, func() bool { return tn.n.guards.PartitionOpen("t", 0) })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	var list messages.QuarantineList
	if st := adminAsk(t, nc, "quarantine", messages.QuarantineRequest{}, &list); st != "" {
		t.Fatalf("quarantine: status %s", st)
	}
	if len(list.Nodes) != 1 || list.Nodes[0].Node != "n1" || list.Nodes[0].TotalCopies != 3 || list.Nodes[0].TotalBytes != seeded || len(list.Errors) != 0 {
		t.Fatalf("quarantine: got %+v, want n1 with 3 copies of %d bytes", list, seeded)
	}
	var paths []string
	for _, c := range list.Nodes[0].Copies {
		paths = append(paths, c.Path)
	}
	if want := []string{".moves/gone-1.quarantine", ".stale/old@3", "topics/gone/0.quarantine"}; !reflect.DeepEqual(paths, want) {
		t.Fatalf("paths: got %q, want %q", paths, want)
	}
	if st := adminAsk(t, nc, "quarantine", messages.QuarantineRequest{Node: "n9"}, &list); st != "404" {
		t.Fatalf("quarantine of n9: got status %q, want 404", st)
	}

	var rep messages.QuarantineReleaseReply
	for _, tc := range []struct{ node, path, want string }{
		{"n9", "topics/gone/0.quarantine", "404"},
		{"n1", "topics/t/0", "400"}, // a live partition
		{"n1", "topics/t", "400"},   // a live topic
		{"n1", "../escape", "400"},  // out of the data dir
		{"n1", "topics/t/0.quarantine", "404"},
		{"n1", "", "400"},
	} {
		if st := adminAsk(t, nc, "quarantine-release", messages.QuarantineReleaseRequest{Node: tc.node, Path: tc.path}, &rep); st != tc.want {
			t.Errorf("release %s on %s: got status %q, want %s", tc.path, tc.node, st, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(tn.cfg.DataDir, "topics/t/0")); err != nil {
		t.Fatalf("the live partition after refused releases: %v", err)
	}

	in := messages.QuarantineReleaseRequest{Node: "n1", Path: "topics/gone/0.quarantine", DryRun: true}
	if st := adminAsk(t, nc, "quarantine-release", in, &rep); st != "" {
		t.Fatalf("dry run: status %s", st)
	}
	if want := (messages.QuarantineReleaseReply{Node: "n1", Path: in.Path, Kind: "partition", Bytes: 124, DryRun: true}); rep != want {
		t.Fatalf("dry run: got %+v, want %+v", rep, want)
	}
	if _, err := os.Stat(filepath.Join(tn.cfg.DataDir, in.Path)); err != nil {
		t.Fatalf("after a dry run: %v, want the copy kept", err)
	}
	in.DryRun = false
	if st := adminAsk(t, nc, "quarantine-release", in, &rep); st != "" {
		t.Fatalf("release: status %s", st)
	}
	if want := (messages.QuarantineReleaseReply{Node: "n1", Path: in.Path, Kind: "partition", Bytes: 124, Released: true}); rep != want {
		t.Fatalf("release: got %+v, want %+v", rep, want)
	}
	if _, err := os.Stat(filepath.Join(tn.cfg.DataDir, in.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after release: stat got %v, want it gone", err)
	}
	if got := [2]float64{tn.n.metrics.quarantinedCopies.Get(), tn.n.metrics.quarantinedBytes.Get()}; got != [2]float64{2, float64(seeded - 124)} {
		t.Fatalf("gauges after release: got %v, want [2 %d]", got, seeded-124)
	}
	if st := adminAsk(t, nc, "quarantine-release", in, &rep); st != "404" {
		t.Fatalf("a second release: got status %q, want 404", st)
	}

	// The members listing carries the node's figures.
	var members messages.MemberList
	if err := json.Unmarshal(tn.must(200, "GET", "/v1/cluster/members", nil), &members); err != nil {
		t.Fatal(err)
	}
	if m := members.Members[0]; m.QuarantinedBytes == nil || *m.QuarantinedBytes != seeded-124 || m.ReclaimedBytes == nil {
		t.Fatalf("member: got %+v, want quarantined_bytes %d and reclaimed_bytes", m, seeded-124)
	}
}

// Over three nodes: the listing gathers every member's copies, a release
// reaches the member named through whichever node answers, and the members
// listing shows each member's own figures, absent for one that does not
// answer.
func TestQuarantineOverTheClusterGathersEveryMember(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	var seeded int64
	c := newTestCluster(t, 3, func(i int, cfg *Config) {
		if i == 1 {
			seeded = seedSetAside(t, cfg.DataDir)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n1 := c.nodes[0].n
	list, err := n1.adminQuarantine(ctx, "", messages.QuarantineRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range list.Nodes {
		got = append(got, fmt.Sprintf("%s:%d:%d", l.Node, l.TotalCopies, l.TotalBytes))
	}
	if want := []string{"n1:0:0", fmt.Sprintf("n2:3:%d", seeded), "n3:0:0"}; !reflect.DeepEqual(got, want) || len(list.Errors) != 0 {
		t.Fatalf("listing: got %q (errors %v), want %q", got, list.Errors, want)
	}
	one, err := n1.adminQuarantine(ctx, "", messages.QuarantineRequest{Node: "n2"})
	if err != nil || len(one.Nodes) != 1 || one.Nodes[0].Node != "n2" {
		t.Fatalf("listing of n2: got %+v, %v, want n2's alone", one, err)
	}

	// Released on n2, asked of n1.
	rep, err := n1.adminQuarantineRelease(ctx, "", messages.QuarantineReleaseRequest{Node: "n2", Path: ".stale/old@3"})
	if err != nil || !rep.Released || rep.Node != "n2" || rep.Bytes != 50 {
		t.Fatalf("release on n2 through n1: got %+v, %v, want 50 bytes released by n2", rep, err)
	}
	if _, err := os.Stat(filepath.Join(c.nodes[1].cfg.DataDir, ".stale/old@3")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("n2's copy after release: stat got %v, want it gone", err)
	}
	_, err = n1.adminQuarantineRelease(ctx, "", messages.QuarantineReleaseRequest{Node: "n2", Path: "topics/gone"})
	if re, ok := errors.AsType[*transport.RemoteError](err); !ok || re.Status != 400 {
		t.Fatalf("release of a topic dir on n2: got %v, want n2's 400", err)
	}

	c.nodes[1].n.quarantine.reclaimed(77)
	figures := func() map[string]string {
		out := map[string]string{}
		for _, m := range n1.Members(ctx) {
			q, r := "null", "null"
			if m.QuarantinedBytes != nil {
				q = fmt.Sprint(*m.QuarantinedBytes)
			}
			if m.ReclaimedBytes != nil {
				r = fmt.Sprint(*m.ReclaimedBytes)
			}
			out[m.ID] = q + "/" + r
		}
		return out
	}
	wantN2 := fmt.Sprintf("%d/%d", seeded-50, c.nodes[1].n.quarantine.reclaimedBytes())
	if got := figures(); got["n2"] != wantN2 || got["n1"] == "null/null" || got["n3"] == "null/null" {
		t.Fatalf("members: got %v, want n2 %s and figures for n1 and n3", got, wantN2)
	}
	c.cutOff(2, true)
	defer c.cutOff(2, false)
	if got := figures(); got["n3"] != "null/null" || got["n2"] != wantN2 || len(got) != 3 {
		t.Fatalf("members with n3 cut off: got %v, want n3 null/null and the rest as before", got)
	}
}

func TestQuarantineListMaxCopiesIsBounded(t *testing.T) {
	for _, n := range []int{0, -1, 10001} {
		c := DefaultConfig()
		c.QuarantineListMaxCopies = n
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "QuarantineListMaxCopies") {
			t.Errorf("QuarantineListMaxCopies %d: got %v, want ErrInvalid naming it", n, err)
		}
	}
}
