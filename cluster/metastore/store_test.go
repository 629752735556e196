//go:build !noraft

package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// The tests that open a Dragonboat NodeHost (this file, cluster_test.go,
// members_test.go, raftmembers_test.go, restart_test.go, bench_test.go)
// carry the build constraint !noraft. Plain `go test` runs them as always;
// `go test -tags noraft` leaves out only them, so the mutation runs of
// `task mutate`, which mutate only the pure state machines, run the
// state-machine tests in milliseconds instead of the Raft tests for
// seconds per mutant.

// testLog is process-wide on purpose: Dragonboat's logger is installed
// once per process, and a logger bound to one test's t would outlive it.
var testLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// hangGuard bounds a whole test so that a bug hangs it for seconds, not
// forever. Nothing asserts on elapsed time.
const hangGuard = 30 * time.Second

// guardCtx is a test's context: cancelled when the test is cleaned up,
// and at the latest after hangGuard, so that a hang fails the one
// test that hangs instead of the whole run.
func guardCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// longTest skips a test that starts NodeHosts under -short (why says what
// it starts) and otherwise is guardCtx.
func longTest(t *testing.T, why string) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
	return guardCtx(t)
}

// raftPorts hands out this package's ports (testnet.Metastore).
var raftPorts = testnet.Metastore.Ports()

// freeAddr is a loopback address for a Raft replica (testnet.Ports).
func freeAddr(t testing.TB) string { return raftPorts.Addr(t) }

// fastConfig is a single-replica, in-memory config with 1 ms ticks.
func fastConfig(t testing.TB, node string) Config {
	return Config{
		NodeID:          node,
		ReplicaID:       1,
		RaftAddr:        freeAddr(t),
		InMemory:        true,
		RTTMillisecond:  1,
		ElectionRTT:     10,
		HeartbeatRTT:    1,
		ProposalTimeout: 5 * time.Second,
	}
}

func openReady(t testing.TB, ctx context.Context, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg, testLog)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return s
}

// waitUntil waits, through Changed, until cond holds on s.
func waitUntil(t *testing.T, ctx context.Context, s *Store, what string, cond func() bool) {
	t.Helper()
	for {
		ch := s.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s on replica %d: never happened: %v", what, s.ReplicaID(), ctx.Err())
		}
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func counter(shard uint64, result string) uint64 {
	return metrics.GetOrCreateCounter(fmt.Sprintf(`narad_metastore_proposals_total{shard="%d",result="%s"}`, shard, result)).Get()
}

func TestStoreSingleReplica(t *testing.T) {
	ctx := guardCtx(t)
	s := openReady(t, ctx, fastConfig(t, "n1"))

	// Topics: create, exists, list, read.
	v0 := s.Version()
	changed, again := s.Changed(), s.Changed()
	if changed != again {
		t.Fatalf("Changed twice before an apply: got two channels, want one shared")
	}
	orders, err := s.CreateTopic(ctx, messages.Topic{Name: "orders", Partitions: 3, CreatedAt: 100})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if orders.Incarnation == 0 || orders.Partitions != 3 || orders.CreatedAt != 100 {
		t.Fatalf("created topic: got %+v, want an incarnation, 3 partitions, CreatedAt 100", orders)
	}
	if !closed(changed) {
		t.Fatalf("Changed after a create: got open, want closed")
	}
	if closed(s.Changed()) {
		t.Fatalf("Changed after the change was seen: got closed, want a fresh open channel")
	}
	if s.Version() == v0 {
		t.Fatalf("Version after a create: got %d again, want it moved", v0)
	}

	existsBefore := counter(MetaShard, "exists")
	dup, err := s.CreateTopic(ctx, messages.Topic{Name: "orders", Partitions: 9})
	if !errors.Is(err, ErrExists) || dup.Incarnation != orders.Incarnation {
		t.Fatalf("second CreateTopic: got (%+v, %v), want the existing topic and ErrExists", dup, err)
	}
	if got := counter(MetaShard, "exists") - existsBefore; got != 1 {
		t.Errorf("proposals_total{result=exists}: got +%d, want +1", got)
	}
	if _, err := s.CreateTopic(ctx, messages.Topic{Name: "", Partitions: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("CreateTopic without a name: got %v, want ErrInvalid", err)
	}
	if _, err := s.CreateTopic(ctx, messages.Topic{Name: "audit", Partitions: 1}); err != nil {
		t.Fatalf("CreateTopic audit: %v", err)
	}
	if got, ok := s.Topic("orders"); !ok || !reflect.DeepEqual(got, orders) {
		t.Errorf("Topic(orders): got (%+v, %t), want (%+v, true)", got, ok, orders)
	}
	if got := s.Topics(); len(got) != 2 || got[0].Name != "audit" || got[1].Name != "orders" {
		t.Errorf("Topics: got %+v, want audit then orders", got)
	}
	if got, ok, err := s.LeaderTopic(ctx, "orders"); err != nil || !ok || !reflect.DeepEqual(got, orders) {
		t.Errorf("LeaderTopic(orders): got (%+v, %t, %v), want (%+v, true, nil)", got, ok, err, orders)
	}
	if _, ok, err := s.LeaderTopic(ctx, "nope"); err != nil || ok {
		t.Errorf("LeaderTopic(nope): got (%t, %v), want (false, nil)", ok, err)
	}

	// Alter.
	altered, err := s.AlterTopic(ctx, messages.AlterTopic{Name: "orders", Partitions: 5, RetentionMs: ptr(int64(60_000))})
	if err != nil || altered.Partitions != 5 || altered.RetentionMs != 60_000 {
		t.Fatalf("AlterTopic grow: got (%+v, %v), want 5 partitions and retention 60000", altered, err)
	}
	if _, err := s.AlterTopic(ctx, messages.AlterTopic{Name: "orders", Partitions: 2}); !errors.Is(err, ErrInvalid) {
		t.Errorf("AlterTopic shrink: got %v, want ErrInvalid", err)
	}
	if _, err := s.AlterTopic(ctx, messages.AlterTopic{Name: "nope", Partitions: 2}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AlterTopic absent: got %v, want ErrNotFound", err)
	}

	// Assignments: put, list, move, flip.
	inc := orders.Incarnation
	var as []messages.Assignment
	for p := range 5 {
		as = append(as, messages.Assignment{Topic: "orders", Incarnation: inc, Partition: p, Owner: "n1"})
	}
	if err := s.PutAssignments(ctx, as); err != nil {
		t.Fatalf("PutAssignments: %v", err)
	}
	if err := s.PutAssignments(ctx, []messages.Assignment{{Topic: "orders", Incarnation: inc, Partition: 0, Owner: "n9"}}); err != nil {
		t.Fatalf("PutAssignments again: %v", err)
	}
	if got := s.Assignments(inc, 5); !reflect.DeepEqual(got, as) {
		t.Errorf("Assignments: got %+v, want %+v (a second put never overwrites)", got, as)
	}
	for p := range 5 {
		if got, ok := s.Assignment(inc, p); !ok || got != as[p] {
			t.Errorf("Assignment(%d): got %+v, %v, want %+v", p, got, ok, as[p])
		}
	}
	if got, ok := s.Assignment(inc, 5); ok {
		t.Errorf("Assignment past the partitions: got %+v, want none", got)
	}
	if got := s.Assignments(inc, 2); len(got) != 2 {
		t.Errorf("Assignments of 2 partitions: got %d, want 2", len(got))
	}
	if got := s.OwnedBy("n1"); len(got) != 5 {
		t.Errorf("OwnedBy(n1): got %d, want 5", len(got))
	}
	if err := s.PutAssignments(ctx, []messages.Assignment{{Topic: "orders", Incarnation: inc, Partition: 9}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("PutAssignments without an owner: got %v, want ErrInvalid", err)
	}

	v1, a1 := s.Version(), s.AssignmentsVersion()
	r, err := s.SetTarget(ctx, messages.SetTarget{Incarnation: inc, Partition: 0, Owner: "n1", To: "n2"})
	if err != nil || r.Code != messages.ResultOK || r.Assignment.Target != "n2" {
		t.Fatalf("SetTarget: got (%+v, %v), want OK with target n2", r, err)
	}
	if s.Version() == v1 || s.AssignmentsVersion() == a1 {
		t.Errorf("versions after SetTarget: got %d and %d again, want both moved", v1, a1)
	}
	// rule R2: a heartbeat moves Version but not AssignmentsVersion.
	a2 := s.AssignmentsVersion()
	if _, err := s.PutMember(ctx, messages.Member{ID: "n7", ReplicaID: 7, RaftAddr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, "n7"); err != nil {
		t.Fatal(err)
	}
	if got := s.AssignmentsVersion(); got != a2 {
		t.Errorf("AssignmentsVersion after a heartbeat: got %d, want %d", got, a2)
	}
	if got := s.TargetedAt("n2"); len(got) != 1 || got[0].Partition != 0 {
		t.Errorf("TargetedAt(n2): got %+v, want partition 0", got)
	}
	if got := s.Moving(); len(got) != 1 || got[0].Partition != 0 || got[0].Target != "n2" {
		t.Errorf("Moving: got %+v, want partition 0 moving to n2", got)
	}
	r, err = s.SetTarget(ctx, messages.SetTarget{Incarnation: inc, Partition: 0, Owner: "n1", From: "n3", To: ""})
	if err != nil || r.Code != messages.ResultRefused || r.Assignment.Target != "n2" {
		t.Errorf("SetTarget with a stale From: got (%+v, %v), want refused showing target n2", r, err)
	}
	if _, err := s.SetTarget(ctx, messages.SetTarget{Incarnation: inc, Partition: 0, Owner: "n1", To: "n1"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetTarget to the owner: got %v, want ErrInvalid", err)
	}

	// rule O3: the flip is a compare-and-swap.
	r, err = s.Flip(ctx, messages.Flip{Incarnation: inc, Partition: 0, From: "n1", To: "n2"})
	if err != nil || r.Code != messages.ResultOK || r.Assignment.Owner != "n2" || r.Assignment.Target != "" {
		t.Fatalf("Flip: got (%+v, %v), want OK, owner n2, no target", r, err)
	}
	// rule O4: a retried flip is answered as done.
	r, err = s.Flip(ctx, messages.Flip{Incarnation: inc, Partition: 0, From: "n1", To: "n2"})
	if err != nil || r.Code != messages.ResultOK {
		t.Errorf("retried Flip: got (%+v, %v), want OK", r, err)
	}
	r, err = s.Flip(ctx, messages.Flip{Incarnation: inc, Partition: 1, From: "n1", To: "n2"})
	if err != nil || r.Code != messages.ResultRefused || r.Assignment.Owner != "n1" {
		t.Errorf("Flip without a target: got (%+v, %v), want refused, owner n1", r, err)
	}
	r, err = s.Flip(ctx, messages.Flip{Incarnation: inc, Partition: 99, From: "n1", To: "n2"})
	if err != nil || r.Code != messages.ResultNotFound {
		t.Errorf("Flip of an absent partition: got (%+v, %v), want not found", r, err)
	}
	if _, err := s.Flip(ctx, messages.Flip{Incarnation: inc, Partition: 0, From: "n2", To: "n2"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Flip to itself: got %v, want ErrInvalid", err)
	}
	if a, ok, err := s.LeaderAssignment(ctx, inc, 0); err != nil || !ok || a.Owner != "n2" {
		t.Errorf("LeaderAssignment: got (%+v, %t, %v), want owner n2", a, ok, err)
	}
	if _, ok, err := s.LeaderAssignment(ctx, inc, 99); err != nil || ok {
		t.Errorf("LeaderAssignment of an absent partition: got (%t, %v), want (false, nil)", ok, err)
	}
	if got := s.OwnedBy("n2"); len(got) != 1 || got[0].Partition != 0 {
		t.Errorf("OwnedBy(n2): got %+v, want partition 0", got)
	}
	if got := s.TargetedAt("n2"); len(got) != 0 {
		t.Errorf("TargetedAt(n2) after the flip: got %+v, want none", got)
	}

	// Delete.
	deleted, err := s.DeleteTopic(ctx, "orders")
	if err != nil || deleted.Incarnation != inc || deleted.Partitions != 5 {
		t.Fatalf("DeleteTopic: got (%+v, %v), want the record of incarnation %d", deleted, err, inc)
	}
	if _, err := s.DeleteTopic(ctx, "orders"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteTopic again: got %v, want ErrNotFound", err)
	}
	if _, ok := s.Topic("orders"); ok {
		t.Errorf("Topic(orders) after delete: got found, want absent")
	}
	if err := s.DeleteAssignments(ctx, inc, deleted.Partitions); err != nil {
		t.Fatalf("DeleteAssignments: %v", err)
	}
	if got := s.Assignments(inc, 0); len(got) != 0 {
		t.Errorf("Assignments after delete: got %+v, want none", got)
	}
	if got := s.OwnedBy("n1"); len(got) != 0 {
		t.Errorf("OwnedBy(n1) after delete: got %+v, want none", got)
	}
}

func TestChangedWakesEveryWaiter(t *testing.T) {
	ctx := guardCtx(t)
	s := openReady(t, ctx, fastConfig(t, "n1"))
	ch := s.Changed()
	woken := make(chan int, 8)
	for i := range 8 {
		go func() {
			<-ch
			woken <- i
		}()
	}
	if _, err := s.CreateTopic(ctx, messages.Topic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		select {
		case <-woken:
		case <-ctx.Done():
			t.Fatalf("waiters woken: got fewer than 8: %v", ctx.Err())
		}
	}
}

func TestNoQuorumIsUnavailable(t *testing.T) {
	ctx := guardCtx(t)
	cfg := fastConfig(t, "n1")
	// Three voters, but only this one runs: no shard can elect.
	cfg.InitialMembers = map[uint64]string{1: cfg.RaftAddr, 2: freeAddr(t), 3: freeAddr(t)}
	cfg.ProposalTimeout = 200 * time.Millisecond
	s, err := Open(cfg, testLog)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := s.WaitReady(short); !errors.Is(err, ErrUnavailable) {
		t.Errorf("WaitReady without quorum: got %v, want ErrUnavailable", err)
	}
	if _, err := s.CreateTopic(ctx, messages.Topic{Name: "t", Partitions: 1}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("CreateTopic without quorum: got %v, want ErrUnavailable", err)
	}
	if _, _, err := s.LeaderTopic(ctx, "t"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("LeaderTopic without quorum: got %v, want ErrUnavailable", err)
	}
	if _, err := s.Flip(ctx, messages.Flip{Incarnation: 1, From: "a", To: "b"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Flip without quorum: got %v, want ErrUnavailable", err)
	}
	if got := s.Topics(); len(got) != 0 {
		t.Errorf("Topics without quorum: got %+v, want none", got)
	}
}

func TestOpenRefusesAnInvalidConfig(t *testing.T) {
	if _, err := Open(Config{NodeID: "n1"}, testLog); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open with no replica id: got %v, want ErrInvalid", err)
	}
}

// FlipMany spreads many flips over the assignment shards, several entries
// per shard past maxFlipsPerEntry, and answers each in the caller's order.
func TestFlipManyAnswersEachFlipInOrder(t *testing.T) {
	ctx := guardCtx(t)
	s := openReady(t, ctx, fastConfig(t, "n1"))
	const n = 3*maxFlipsPerEntry + 5 // past the bound on at least one shard
	as := make([]messages.Assignment, n)
	flips := make([]messages.Flip, n+1)
	for p := range n {
		target := "n2"
		if p%10 == 3 {
			target = "n3" // re-planned: the flip to n2 is refused
		}
		as[p] = messages.Assignment{Topic: "t", Incarnation: 5, Partition: p, Owner: "n1", Target: target}
		flips[p] = messages.Flip{Incarnation: 5, Partition: p, From: "n1", To: "n2"}
	}
	flips[n] = messages.Flip{Incarnation: 5, Partition: 0, From: "n1", To: "n1"} // invalid, never proposed
	if err := s.PutAssignments(ctx, as); err != nil {
		t.Fatal(err)
	}
	out := s.FlipMany(ctx, flips)
	if len(out) != len(flips) {
		t.Fatalf("outcomes: got %d, want %d", len(out), len(flips))
	}
	for p := range n {
		o := out[p]
		want, owner := messages.ResultOK, "n2"
		if p%10 == 3 {
			want, owner = messages.ResultRefused, "n1"
		}
		if o.Err != nil || o.Result.Code != want || o.Result.Assignment == nil || o.Result.Assignment.Partition != p || o.Result.Assignment.Owner != owner {
			t.Fatalf("flip of partition %d: got %+v (err %v), want code %d with partition %d owned by %s", p, o.Result, o.Err, want, p, owner)
		}
		if a, ok, err := s.LeaderAssignment(ctx, 5, p); err != nil || !ok || a.Owner != owner {
			t.Fatalf("partition %d read back: got %+v (found %v, err %v), want owner %s", p, a, ok, err, owner)
		}
	}
	if !errors.Is(out[n].Err, ErrInvalid) {
		t.Fatalf("a flip from n1 to n1: got %v, want ErrInvalid", out[n].Err)
	}
	// Retrying the whole batch is safe: the applied flips answer OK again.
	for p, o := range s.FlipMany(ctx, flips[:n]) {
		if want := map[bool]messages.ResultCode{true: messages.ResultRefused, false: messages.ResultOK}[p%10 == 3]; o.Err != nil || o.Result.Code != want {
			t.Fatalf("retried flip of partition %d: got code %d (err %v), want %d", p, o.Result.Code, o.Err, want)
		}
	}
}

// SetTargetMany spreads a planning round's targets over the assignment
// shards, several entries per shard past maxTargetsPerEntry, answers each
// in the caller's order, and stamps its entries with the version that
// knows them.
func TestSetTargetManyAnswersEachTargetInOrder(t *testing.T) {
	ctx := guardCtx(t)
	s := openReady(t, ctx, fastConfig(t, "n1"))
	const n = 3*maxTargetsPerEntry + 5
	as := make([]messages.Assignment, n)
	targets := make([]messages.SetTarget, n+1)
	for p := range n {
		target := ""
		if p%10 == 3 {
			target = "n3" // already moving: the pick is refused
		}
		as[p] = messages.Assignment{Topic: "t", Incarnation: 5, Partition: p, Owner: "n1", Target: target}
		targets[p] = messages.SetTarget{Incarnation: 5, Partition: p, Owner: "n1", From: "", To: "n2"}
	}
	targets[n] = messages.SetTarget{Incarnation: 5, Partition: 0, Owner: "n1", To: "n1"} // invalid, never proposed
	if err := s.PutAssignments(ctx, as); err != nil {
		t.Fatal(err)
	}
	out := s.SetTargetMany(ctx, targets)
	if len(out) != len(targets) {
		t.Fatalf("outcomes: got %d, want %d", len(out), len(targets))
	}
	for p := range n {
		o := out[p]
		want, target := messages.ResultOK, "n2"
		if p%10 == 3 {
			want, target = messages.ResultRefused, "n3"
		}
		if o.Err != nil || o.Result.Code != want || o.Result.Assignment == nil || o.Result.Assignment.Partition != p || o.Result.Assignment.Target != target {
			t.Fatalf("target of partition %d: got %+v (err %v), want code %d with partition %d aimed at %s", p, o.Result, o.Err, want, p, target)
		}
		if a, ok, err := s.LeaderAssignment(ctx, 5, p); err != nil || !ok || a.Target != target || a.Owner != "n1" {
			t.Fatalf("partition %d read back: got %+v (found %v, err %v), want owner n1 aimed at %s", p, a, ok, err, target)
		}
	}
	if !errors.Is(out[n].Err, ErrInvalid) {
		t.Fatalf("a target of n1's partition at n1: got %v, want ErrInvalid", out[n].Err)
	}
}

// An entry is stamped with the oldest version that knows it, so a replica
// of an older binary keeps applying every other assignment command.
func TestAssignCommandVersion(t *testing.T) {
	for _, tt := range []struct {
		cmd  messages.AssignCommand
		want int
	}{
		{messages.AssignCommand{SetTargets: &messages.SetTargets{}}, messages.TargetsCommandVersion},
		{messages.AssignCommand{SetTarget: &messages.SetTarget{}}, 2},
		{messages.AssignCommand{Flips: &messages.Flips{}}, 2},
		{messages.AssignCommand{PutAssignments: &messages.PutAssignments{}}, 2},
	} {
		if got := assignCommandVersion(tt.cmd); got != tt.want {
			t.Errorf("version of %+v: got %d, want %d", tt.cmd, got, tt.want)
		}
	}
}

// FirstSettled answers up to k of a node's partitions with no target, taken
// from the shards in turn (a round's targets and flips spread over every
// shard's Raft group), and all of them when k is larger.
func TestFirstSettledTakesFromEveryShardInTurn(t *testing.T) {
	ctx := guardCtx(t)
	s := openReady(t, ctx, fastConfig(t, "n1"))
	const n = 400
	as := make([]messages.Assignment, n)
	settled := 0
	for p := range n {
		as[p] = messages.Assignment{Topic: "t", Incarnation: 5, Partition: p, Owner: "n1"}
		if p%5 == 0 {
			as[p].Target = "n2"
		} else {
			settled++
		}
	}
	if err := s.PutAssignments(ctx, as); err != nil {
		t.Fatal(err)
	}
	k := 2 * s.cfg.AssignmentShards
	got := s.FirstSettled("n1", k)
	if len(got) != k {
		t.Fatalf("k=%d: got %d assignments, want %d", k, len(got), k)
	}
	shards := map[uint64]int{}
	for _, key := range got {
		if a, ok := s.Assignment(key.Incarnation, key.Partition); !ok || a.Owner != "n1" || a.Target != "" || a.Topic != key.Topic {
			t.Fatalf("got %+v (%+v, %v), want a partition of t n1 owns with no target", key, a, ok)
		}
		shards[AssignmentShard(key.Incarnation, key.Partition, s.cfg.AssignmentShards)]++
	}
	for shard, c := range shards {
		if c != 2 {
			t.Fatalf("shard %d gave %d of %d (by shard: %v), want 2 from each of the %d shards", shard, c, k, shards, s.cfg.AssignmentShards)
		}
	}
	if len(shards) != s.cfg.AssignmentShards {
		t.Fatalf("got partitions of %d shards (%v), want all %d", len(shards), shards, s.cfg.AssignmentShards)
	}
	if got := s.FirstSettled("n1", 10*n); len(got) != settled {
		t.Fatalf("k past what n1 holds: got %d, want every settled one, %d", len(got), settled)
	}
	if got := s.OwnedCount("n1"); got != n {
		t.Fatalf("OwnedCount: got %d, want %d", got, n)
	}
	// n3 owns 40 partitions of one shard and one of each other: the other
	// shards fall short of their share, and the full one makes it up.
	var n3 []messages.Assignment
	of := map[uint64]int{}
	for p := 0; len(n3) < 40+s.cfg.AssignmentShards-1; p++ {
		shard := AssignmentShard(6, p, s.cfg.AssignmentShards)
		if limit := map[bool]int{true: 40, false: 1}[shard == AssignmentShard(6, 0, s.cfg.AssignmentShards)]; of[shard] < limit {
			of[shard]++
			n3 = append(n3, messages.Assignment{Topic: "u", Incarnation: 6, Partition: p, Owner: "n3"})
		}
	}
	if err := s.PutAssignments(ctx, n3); err != nil {
		t.Fatal(err)
	}
	if got := s.FirstSettled("n3", k); len(got) != k {
		t.Fatalf("n3, one shard full and the others short: got %d, want %d", len(got), k)
	}
}

// Applied reads every shard's applied index, and WaitApplied returns only
// once this replica applied as much: what a restarted node's start takes
// from a peer instead of its own ready reads.
func TestWaitAppliedWaitsForEveryShard(t *testing.T) {
	ctx := guardCtx(t)
	s := openReady(t, ctx, fastConfig(t, "n1"))
	now, err := s.Applied(ctx)
	if err != nil {
		t.Fatalf("Applied: %v", err)
	}
	if len(now) != len(s.Shards()) {
		t.Fatalf("Applied: got %d indexes, want one for each of %d shards", len(now), len(s.Shards()))
	}
	if err := s.WaitApplied(ctx, now); err != nil {
		t.Fatalf("WaitApplied(%v) of what is applied: %v", now, err)
	}
	if err := s.WaitApplied(ctx, now[1:]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("WaitApplied of too few shards: got %v, want ErrInvalid", err)
	}
	ahead := slices.Clone(now)
	ahead[0]++ // the metadata shard's next entry
	done := make(chan error, 1)
	go func() { done <- s.WaitApplied(ctx, ahead) }()
	select {
	case err := <-done:
		t.Fatalf("WaitApplied(%v) with %v applied: returned %v, want it to wait", ahead, now, err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := s.CreateTopic(ctx, messages.Topic{Name: "next", Partitions: 3, CreatedAt: 1}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitApplied(%v) after an entry of the metadata shard: %v", ahead, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	ahead[1] += 1 << 40
	if err := s.WaitApplied(short, ahead); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("WaitApplied of an index never reached, ctx ended: got %v, want ErrUnavailable", err)
	}
}
