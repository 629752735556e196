package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// seedSetAside writes copies set aside (and live data beside them) into a
// data dir as earlier runs of a node would have left them; it returns the
// bytes set aside. (The sweeper's own tests, in actors/sweeper, seed the
// same.)
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
	// A partition is created at rest, its directory made at its first
	// produce: write to the one the refused releases must leave alone.
	tn.must(http.StatusAccepted, "POST", "/v1/topics/t/produce?partition=0", []byte("live"))
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
	n1 := c.nodes[0].n
	// The listing asks the members n1's replica lists alive, which may not
	// have applied every registration yet (seen beside a second suite).
	c.waitFor("n1's replica listing three live members", func() bool {
		alive := 0
		for _, m := range n1.Store().Members() {
			if m.Status == messages.MemberAlive {
				alive++
			}
		}
		return alive == 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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

	c.nodes[1].n.metrics.sweepReclaimed.Add(77)
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
	wantN2 := fmt.Sprintf("%d/%d", seeded-50, int64(c.nodes[1].n.metrics.sweepReclaimed.Get()))
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
		c.Sweep.QuarantineListMaxCopies = n
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Sweep") || !strings.Contains(err.Error(), "QuarantineListMaxCopies") {
			t.Errorf("Sweep.QuarantineListMaxCopies %d: got %v, want ErrInvalid naming it", n, err)
		}
	}
}
