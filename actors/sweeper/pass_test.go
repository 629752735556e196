package sweeper

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/sweep"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// rules S1, S3: a copy of a partition n2 owns now, whose owner lists every
// segment of it and a durable marker from n1, is reclaimed: its directory
// goes, and its bytes are counted in the pass's report and in the book's
// reclaimed figure.
func TestRuleS1S3AVouchedCopyIsReclaimed(t *testing.T) {
	r := newSweepRig(t)
	r.topic(sweepOrders, "n2")
	ls := r.copyOf(sweepOrders0, 10)
	r.owners.answer(sweepOrders0, movedFromHere(ls, ls.HWM, ls.HWM))
	want := sweptBytes(t, r.path(sweepOrders0))

	rep := r.pass(0)
	if got := r.owners.askedKeys(); !slices.Equal(got, []messages.PartitionKey{sweepOrders0}) {
		t.Fatalf("owner asked for: got %v, want [%v] (rule S1: ask before reclaiming)", got, sweepOrders0)
	}
	if pathExists(t, r.path(sweepOrders0)) {
		t.Fatal("a copy its owner vouches for: got it kept, want it reclaimed")
	}
	if got := rep.judged[sweep.Reclaim]; got != 1 {
		t.Fatalf("reclaims: got %d, want 1 (judged %v)", got, rep.judged)
	}
	if rep.reclaimedBytes != want {
		t.Fatalf("reclaimed bytes in the report: got %d, want %d", rep.reclaimedBytes, want)
	}
	if got := r.s.book.reclaimedBytes(); got != want {
		t.Fatalf("reclaimed bytes in the book: got %d, want %d", got, want)
	}
	if pathExists(t, storage.PartitionPath(r.d.DataDir, "orders", 0)+".quarantine") {
		t.Fatal("a vouched copy: got it quarantined, want it reclaimed")
	}
}

// A pass judges on a replica caught up with the leaders: one that lags
// could name the old owner of a partition flipped here, whose copy is then
// the live one. While the barrier fails, the pass judges nothing.
func TestSweepJudgesNothingUntilTheReplicaCaughtUp(t *testing.T) {
	r := newSweepRig(t)
	r.topic(sweepOrders, "n2")
	ls := r.copyOf(sweepOrders0, 10)
	r.owners.answer(sweepOrders0, movedFromHere(ls, ls.HWM, ls.HWM))
	r.replica.catchUpErr = errors.New("no leader")
	rep := r.pass(0)
	if len(r.owners.askedKeys()) != 0 || len(rep.judged) != 0 || !pathExists(t, r.path(sweepOrders0)) {
		t.Fatalf("a pass whose catch-up failed: got asked %v, judged %v, copy kept %v; want nothing asked, judged or removed",
			r.owners.askedKeys(), rep.judged, pathExists(t, r.path(sweepOrders0)))
	}
	r.replica.catchUpErr = nil
	if r.pass(0); pathExists(t, r.path(sweepOrders0)) {
		t.Fatal("the next pass, caught up: got the copy kept, want it reclaimed")
	}
}

// rule S1: the vouched position is the owner's HWM, never more than its
// marker's promoted one, and the reclaim re-checks under the guard that
// the copy is still at or below it. The copy grows by two records while
// the owner is asked (past the lower of the two, below the higher): the
// reclaim is refused and the copy stays.
func TestRuleS1TheVouchedPositionIsTheLowerOfTheOwnersHWMAndThePromotedOne(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		ownerHWM, promoted   int64 // past the local copy's 10
		wantVouched, grownTo int64
	}{
		{"the owner's HWM above the promoted one", 14, 10, 10, 12},
		{"the promoted HWM above the owner's", 10, 14, 10, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSweepRig(t)
			r.topic(sweepOrders, "n2")
			ls := r.copyOf(sweepOrders0, 10)
			r.owners.answer(sweepOrders0, movedFromHere(ls, tc.ownerHWM, tc.promoted))
			r.owners.onAsk = func(k messages.PartitionKey) {
				if err := r.writeRecords(r.path(k), int(tc.grownTo-ls.HWM)); err != nil {
					t.Error(err)
				}
			}

			rep := r.pass(0)
			if !pathExists(t, r.path(sweepOrders0)) {
				t.Fatalf("a copy grown to %d, vouched %d (owner HWM %d, promoted %d): got it reclaimed, want it kept",
					tc.grownTo, tc.wantVouched, tc.ownerHWM, tc.promoted)
			}
			if got := rep.judged[sweep.Defer]; got != 1 {
				t.Fatalf("verdicts: got %v, want the refused reclaim counted as one defer", rep.judged)
			}
			got, err := storage.ListClosed(r.path(sweepOrders0), r.d.LogConfig, time.Now())
			if err != nil || got.HWM != tc.grownTo {
				t.Fatalf("the copy after the refusal: got HWM %d (err %v), want %d, untouched", got.HWM, err, tc.grownTo)
			}
		})
	}
}

// rule S3: the sweep defers, leaving the copy where it is, while the owner
// cannot be asked: the ask fails, or the owner answers not OK.
func TestRuleS3ACopyStaysWhileTheOwnerCannotBeAsked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(r *sweepRig, ls storage.Listing)
	}{
		{"the owner unreachable", func(*sweepRig, storage.Listing) {}},
		{"the owner answers unavailable", func(r *sweepRig, ls storage.Listing) {
			l := movedFromHere(ls, ls.HWM, ls.HWM)
			l.Status = messages.StatusUnavailable
			r.owners.answer(sweepOrders0, l)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSweepRig(t)
			r.topic(sweepOrders, "n2")
			ls := r.copyOf(sweepOrders0, 10)
			tc.setup(r, ls)
			before := sweptBytes(t, r.path(sweepOrders0))

			rep := r.pass(0)
			if got := rep.judged[sweep.Defer]; got != 1 {
				t.Fatalf("verdicts: got %v, want one defer", rep.judged)
			}
			if !pathExists(t, r.path(sweepOrders0)) {
				t.Fatal("the copy: got it gone from its path, want it kept")
			}
			if got := sweptBytes(t, r.path(sweepOrders0)); got != before {
				t.Fatalf("the copy's bytes: got %d, want %d, untouched", got, before)
			}
			if got := r.s.book.reclaimedBytes(); got != 0 {
				t.Fatalf("reclaimed: got %d bytes, want 0", got)
			}
			if s := r.s.book.snapshot(); len(s.copies) != 0 {
				t.Fatalf("copies set aside: got %v, want none", s.copies)
			}
		})
	}
}

// rule S3: a copy that cannot be listed is deferred, whatever its owner
// answers: here the partition's path names a file, which cannot be read
// as a directory of segments, while its owner vouches for ten records.
// The judgement is made on the listing, not on the reclaim's re-check.
func TestRuleS3ACopyThatCannotBeListedStays(t *testing.T) {
	r := newSweepRig(t)
	r.topic(sweepOrders, "n2")
	ls := r.copyOf(sweepOrders0, 10)
	r.owners.answer(sweepOrders0, movedFromHere(ls, ls.HWM, ls.HWM))
	if err := os.RemoveAll(r.path(sweepOrders0)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.path(sweepOrders0), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}

	v, bytes, set := r.s.judge(context.Background(), copyToJudge{key: sweepOrders0, owner: "n2"})
	if v.Action != sweep.Defer || v.Reason != sweep.ReasonLocalUnlisted || bytes != 0 || set {
		t.Fatalf("verdict: got %v/%s (%d bytes, set aside %v), want defer/%s", v.Action, v.Reason, bytes, set, sweep.ReasonLocalUnlisted)
	}
	if b, err := os.ReadFile(r.path(sweepOrders0)); err != nil || string(b) != "not a directory" {
		t.Fatalf("what is at the path: got %q (err %v), want it untouched", b, err)
	}
}

// rules S2, P6, S5: a copy holding unexpired records that its owner does
// not vouch for is set aside as <N>.quarantine, never deleted, whole;
// counted in the book once the pass refreshed it; and logged at error with
// the case. Each case of S2 in turn; P6's returning source of a
// force-promote (its copy past the promoted HWM); S5's install whose flip
// never committed (the copy's own marker says it came from the owner, and
// the owner has no marker).
func TestRuleS2P6S5EveryUnvouchedCopyIsQuarantinedNeverDeleted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		// copy writes the local copy; owner returns what n2 answers.
		copy  func(r *sweepRig) storage.Listing
		owner func(ls storage.Listing) *messages.PartitionListing
	}{
		{"rule S2: the owner lists no records", sweep.ReasonOwnerListsNoRecords, servedCopy, func(ls storage.Listing) *messages.PartitionListing {
			l := movedFromHere(ls, 0, 0)
			l.Segments = nil
			return l
		}},
		{"rule S2: the owner has records but no marker", sweep.ReasonOwnerHasNoMarker, servedCopy, func(ls storage.Listing) *messages.PartitionListing {
			l := movedFromHere(ls, ls.HWM, ls.HWM)
			l.Marker = nil
			return l
		}},
		{"rule S2: the owner's marker records a move from another node", sweep.ReasonMarkerFromAnother, servedCopy, func(ls storage.Listing) *messages.PartitionListing {
			l := movedFromHere(ls, ls.HWM, ls.HWM)
			l.Marker.SourceNode = "n3"
			return l
		}},
		{"rule S2: a segment below the vouched position is missing on the owner", sweep.ReasonSegmentMissing, servedCopy, func(ls storage.Listing) *messages.PartitionListing {
			l := movedFromHere(ls, ls.HWM, ls.HWM)
			l.Segments = slices.Delete(l.Segments, 1, 2)
			return l
		}},
		{"rule P6: a force-promote's returning source, ahead of the promoted HWM", sweep.ReasonAheadOfPromoted, servedCopy, func(ls storage.Listing) *messages.PartitionListing {
			// The owner promoted its copy at 8 without a freeze and took
			// records since; this copy took two more before it died.
			l := movedFromHere(ls, ls.HWM+5, ls.HWM-2)
			l.Marker.ForcePromoted = true
			return l
		}},
		{"rule S5: an install whose flip never committed, the owner without a marker", sweep.ReasonOwnerHasNoMarker, installedCopy, func(ls storage.Listing) *messages.PartitionListing {
			l := movedFromHere(ls, ls.HWM, ls.HWM)
			l.Marker = nil
			return l
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSweepRig(t)
			r.topic(sweepOrders, "n2")
			ls := tc.copy(r)
			r.owners.answer(sweepOrders0, tc.owner(ls))
			before := sweptBytes(t, r.path(sweepOrders0))

			rep := r.pass(0)
			q := r.path(sweepOrders0) + ".quarantine"
			if pathExists(t, r.path(sweepOrders0)) {
				t.Fatalf("the copy at its path: got it kept there (verdicts %v), want it set aside as %s", rep.judged, q)
			}
			if !pathExists(t, q) {
				t.Fatalf("the copy: got it gone, want it set aside as %s (verdicts %v)", q, rep.judged)
			}
			if got := sweptBytes(t, q); got != before {
				t.Fatalf("the quarantined copy's bytes: got %d, want %d, whole", got, before)
			}
			if got, err := storage.ListClosed(q, r.d.LogConfig, time.Now()); err != nil || got.HWM != ls.HWM {
				t.Fatalf("the quarantined copy: got HWM %d (err %v), want %d", got.HWM, err, ls.HWM)
			}
			if rep.quarantined != 1 || rep.judged[sweep.Quarantine] != 1 {
				t.Fatalf("the report: got %d quarantined, verdicts %v; want 1 and one quarantine", rep.quarantined, rep.judged)
			}
			if rep.reclaimedBytes != 0 || r.s.book.reclaimedBytes() != 0 {
				t.Fatalf("reclaimed: got %d in the report, %d in the book; want 0", rep.reclaimedBytes, r.s.book.reclaimedBytes())
			}
			s := r.s.book.snapshot()
			if len(s.copies) != 1 || s.copies[0].Path != filepath.Join("topics", "orders", "0.quarantine") || s.bytes != before {
				t.Fatalf("the book: got %+v, want the one copy topics/orders/0.quarantine of %d bytes", s.copies, before)
			}
			if got := r.metrics.QuarantinedCopies.Get(); got != 1 {
				t.Fatalf("narad_quarantined_copies: got %v, want 1", got)
			}
			if got := r.errorsWith("reason", tc.reason); got != 1 {
				t.Fatalf("error lines with reason %s: got %d, want 1", tc.reason, got)
			}
		})
	}
}

// servedCopy is a copy this node served: twelve records over several
// segments, no marker.
func servedCopy(r *sweepRig) storage.Listing {
	ls := r.copyOf(sweepOrders0, 12)
	if len(ls.Segments) < 3 {
		r.t.Fatalf("the copy: got %d segments, want at least 3", len(ls.Segments))
	}
	return ls
}

// installedCopy is a move's install from n2 at this node's path whose flip
// never committed: staged, installed with a marker that names n2 as the
// source, and left there.
func installedCopy(r *sweepRig) storage.Listing {
	r.t.Helper()
	st, _, err := storage.OpenStaging(storage.StagingPath(r.d.DataDir, "orders", 0), r.d.LogConfig, "orders/0@41")
	if err != nil {
		r.t.Fatal(err)
	}
	ls := r.appendRecords(st.Dir(), 12)
	if _, err := st.Install(r.path(sweepOrders0), storage.InstallOptions{Marker: storage.Marker{PromotedHWM: ls.HWM, SourceNode: "n2"}, Now: time.Now()}); err != nil {
		r.t.Fatal(err)
	}
	if m, err := storage.ReadMarker(r.path(sweepOrders0)); err != nil || m.SourceNode != "n2" {
		r.t.Fatalf("the installed copy's marker: got %+v (err %v), want one from n2", m, err)
	}
	ls, err = storage.ListClosed(r.path(sweepOrders0), r.d.LogConfig, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	return ls
}

// rule S6: the reclaim acts under the topic's guard only while the topic
// directory's marker is absent or names the incarnation the sweep read,
// no log is open at the path, and the partition is still owned elsewhere
// and not targeted here. Each change below happens while the owner is
// asked, between the judgement (reclaim) and the act.
func TestRuleS6TheReclaimRechecksUnderTheGuard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *sweepRig) error
		kept   bool
	}{
		{"the topic deleted and recreated: its marker names the successor", func(r *sweepRig) error {
			return os.WriteFile(filepath.Join(storage.TopicPath(r.d.DataDir, "orders"), "incarnation"), []byte("8\n"), 0o644)
		}, true},
		{"the topic deleted and recreated: the replica names the successor", func(r *sweepRig) error {
			r.replica.Drop("orders")
			r.replica.Put(messages.Topic{Name: "orders", Incarnation: 8, Partitions: 1}, "n1")
			return nil
		}, true},
		{"a log opened at the path", func(r *sweepRig) error {
			r.guards.MarkOpen("orders", 7, 0)
			return nil
		}, true},
		{"the partition targeted back here", func(r *sweepRig) error {
			r.setTarget(sweepOrders0, "n1")
			return nil
		}, true},
		{"the partition flipped back here", func(r *sweepRig) error {
			r.replica.Put(sweepOrders, "n1")
			return nil
		}, true},
		{"the topic directory's marker gone (absent is allowed)", func(r *sweepRig) error {
			return os.Remove(filepath.Join(storage.TopicPath(r.d.DataDir, "orders"), "incarnation"))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSweepRig(t)
			r.topic(sweepOrders, "n2")
			ls := r.copyOf(sweepOrders0, 10)
			r.owners.answer(sweepOrders0, movedFromHere(ls, ls.HWM, ls.HWM))
			before := sweptBytes(t, r.path(sweepOrders0))
			r.owners.onAsk = func(messages.PartitionKey) {
				if err := tc.change(r); err != nil {
					t.Error(err)
				}
			}

			rep := r.pass(0)
			if kept := pathExists(t, r.path(sweepOrders0)); kept != tc.kept {
				t.Fatalf("the copy kept: got %v, want %v (verdicts %v)", kept, tc.kept, rep.judged)
			}
			if !tc.kept {
				return
			}
			if got := sweptBytes(t, r.path(sweepOrders0)); got != before {
				t.Fatalf("the refused copy's bytes: got %d, want %d, untouched", got, before)
			}
			if rep.judged[sweep.Reclaim] != 0 || rep.judged[sweep.Defer] != 1 || rep.reclaimedBytes != 0 {
				t.Fatalf("the report: got verdicts %v and %d bytes reclaimed, want the refused reclaim as one defer and 0",
					rep.judged, rep.reclaimedBytes)
			}
		})
	}
}

// rule S6: the reclaim acts under the topic's guard. The test holds the
// guard, as a delete-and-recreate preparing the successor's directory
// does, from before the sweep judges: the pass must not finish while it
// is held (it waits in Guards.Lock inside carryOut); the recreate is made
// under the guard, and once it is released the reclaim sees the
// successor's marker and refuses, leaving the successor's partition.
func TestRuleS6TheReclaimWaitsForTheTopicGuard(t *testing.T) {
	r := newSweepRig(t)
	r.topic(sweepOrders, "n2")
	ls := r.copyOf(sweepOrders0, 10)
	r.owners.answer(sweepOrders0, movedFromHere(ls, ls.HWM, ls.HWM))

	unlock := r.guards.Lock("orders")
	done := make(chan report)
	go func() { done <- r.pass(0) }()
	if rep, finished := waitInGuardLock(done); finished {
		unlock()
		t.Fatalf("the pass finished while the topic's guard was held: got verdicts %v, the copy kept %v; want it waiting for the guard",
			rep.judged, pathExists(t, r.path(sweepOrders0)))
	}
	// The successor, prepared under the guard: the old directory set
	// aside, a new one marked 8, its partition 0 written.
	successor := messages.Topic{Name: "orders", Incarnation: 8, Partitions: 1}
	r.replica.Drop("orders")
	r.replica.Put(successor, "n1")
	if _, err := storage.PrepareTopicDir(r.d.DataDir, "orders", 8); err != nil {
		unlock()
		t.Fatal(err)
	}
	want := r.appendRecords(r.path(sweepOrders0), 3)
	unlock()

	rep := <-done
	if rep.judged[sweep.Reclaim] != 0 || rep.reclaimedBytes != 0 {
		t.Fatalf("the report: got verdicts %v, %d bytes reclaimed; want the reclaim refused", rep.judged, rep.reclaimedBytes)
	}
	got, err := storage.ListClosed(r.path(sweepOrders0), r.d.LogConfig, time.Now())
	if err != nil || got.HWM != want.HWM {
		t.Fatalf("the successor's partition: got HWM %d (err %v), want %d, untouched", got.HWM, err, want.HWM)
	}
	if old := filepath.Join(storage.StalePath(r.d.DataDir), "orders@7", "0"); !pathExists(t, old) {
		t.Fatalf("the old incarnation's copy: got none at %s, want it set aside there by the successor's preparation", old)
	}
}

// waitInGuardLock waits until the pass is blocked in the topic guard's
// Lock inside the sweeper's carryOut (read from the goroutines' stacks),
// or has finished: finished reports which, with the pass's report. The
// test's own timeout bounds the wait.
func waitInGuardLock(done <-chan report) (report, bool) {
	buf := make([]byte, 1<<20)
	for {
		select {
		case rep := <-done:
			return rep, true
		default:
		}
		n := runtime.Stack(buf, true)
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "storage.(*Guards).Lock") && strings.Contains(g, "(*Actor).carryOut") {
				return report{}, false
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// rule S6: a copy whose log is open, or whose partition is targeted back
// at this node (the install deals with that copy), is not even judged:
// its owner is not asked, and nothing at its path changes.
func TestRuleS6AnOpenOrTargetedBackCopyIsNotJudged(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(r *sweepRig)
	}{
		{"its log open", func(r *sweepRig) { r.guards.MarkOpen("orders", 7, 0) }},
		{"targeted back here", func(r *sweepRig) { r.setTarget(sweepOrders0, "n1") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSweepRig(t)
			r.topic(sweepOrders, "n2")
			ls := r.copyOf(sweepOrders0, 10)
			r.owners.answer(sweepOrders0, movedFromHere(ls, ls.HWM, ls.HWM))
			tc.setup(r)

			rep := r.pass(0)
			if got := r.owners.askedKeys(); len(got) != 0 {
				t.Fatalf("owner asked for: got %v, want nothing", got)
			}
			if n := judgedTotal(rep); n != 0 {
				t.Fatalf("copies judged: got %d (%v), want 0", n, rep.judged)
			}
			if !pathExists(t, r.path(sweepOrders0)) {
				t.Fatal("the copy: got it gone, want it kept")
			}
		})
	}
}

// rule S7: a topic directory whose marker names an incarnation the replica
// no longer has is removed once the leader confirms that incarnation gone,
// re-checked under the guard. While the leader still names it, or cannot
// be asked, it stays; a recreate seen under the guard keeps it.
func TestRuleS7ADeletedTopicsDirectoryGoesOnlyOnceTheLeaderConfirms(t *testing.T) {
	deleted := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	successor := messages.Topic{Name: "orders", Incarnation: 8, Partitions: 1}
	for _, tc := range []struct {
		name string
		// leader is what the leader answers (nil: no such topic);
		// leaderErr fails the read; during runs as the leader answers.
		leader    *messages.Topic
		leaderErr error
		during    func(r *sweepRig)
		removed   bool
	}{
		{"the leader still names the incarnation", &deleted, nil, nil, false},
		{"the leader cannot be asked", nil, errors.New("no leader"), nil, false},
		{"the leader names the successor", &successor, nil, nil, true},
		{"the leader has no such topic", nil, nil, nil, true},
		{"a recreate seen under the guard: the marker names the successor", nil, nil, func(r *sweepRig) {
			if _, err := os.Stat(storage.TopicPath(r.d.DataDir, "orders")); err != nil {
				r.t.Fatal(err)
			}
			marker := filepath.Join(storage.TopicPath(r.d.DataDir, "orders"), "incarnation")
			if err := os.WriteFile(marker, []byte("8\n"), 0o644); err != nil {
				r.t.Fatal(err)
			}
		}, false},
		{"the replica names the incarnation again under the guard", nil, nil, func(r *sweepRig) {
			r.replica.Put(deleted)
		}, false},
		{"a partition of the name open", nil, nil, func(r *sweepRig) {
			r.guards.MarkOpen("orders", 8, 0)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSweepRig(t)
			if _, err := storage.PrepareTopicDir(r.d.DataDir, "orders", 7); err != nil {
				t.Fatal(err)
			}
			r.copyOf(sweepOrders0, 5)
			want := sweptBytes(t, storage.TopicPath(r.d.DataDir, "orders"))
			r.replica.mu.Lock()
			if tc.leader != nil {
				r.replica.leader["orders"] = *tc.leader
			}
			r.replica.leaderErr = tc.leaderErr
			if tc.during != nil {
				r.replica.onLeader = func() { tc.during(r) }
			}
			r.replica.mu.Unlock()

			rep := r.pass(0)
			gone := !pathExists(t, storage.TopicPath(r.d.DataDir, "orders"))
			if gone != tc.removed {
				t.Fatalf("the deleted incarnation's directory removed: got %v, want %v", gone, tc.removed)
			}
			wantCount, wantBytes := 0, int64(0)
			if tc.removed {
				wantCount, wantBytes = 1, want
			}
			if rep.deletedTopics != wantCount || r.s.book.reclaimedBytes() != wantBytes {
				t.Fatalf("the report: got %d deleted topics, %d bytes reclaimed; want %d and %d",
					rep.deletedTopics, r.s.book.reclaimedBytes(), wantCount, wantBytes)
			}
		})
	}
}

// rule S7: a topic directory set aside as .stale/<topic>@<inc> (its
// incarnation's successor took the path) is removed once the leader
// confirms that incarnation gone, and only then.
func TestRuleS7ASetAsideTopicDirectoryGoesOnlyOnceTheLeaderConfirms(t *testing.T) {
	successor := messages.Topic{Name: "orders", Incarnation: 8, Partitions: 1}
	for _, tc := range []struct {
		name      string
		leader    messages.Topic
		leaderErr error
		removed   bool
	}{
		{"the leader still names the incarnation", sweepOrders, nil, false},
		{"the leader cannot be asked", successor, errors.New("no leader"), false},
		{"the leader names the successor", successor, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSweepRig(t)
			if _, err := storage.PrepareTopicDir(r.d.DataDir, "orders", 7); err != nil {
				t.Fatal(err)
			}
			r.copyOf(sweepOrders0, 5)
			r.topic(successor, "n1") // sets incarnation 7's directory aside
			stale := filepath.Join(storage.StalePath(r.d.DataDir), "orders@7")
			if !pathExists(t, stale) {
				t.Fatalf("the set-aside directory: got none at %s", stale)
			}
			r.replica.mu.Lock()
			r.replica.leader["orders"], r.replica.leaderErr = tc.leader, tc.leaderErr
			r.replica.mu.Unlock()

			rep := r.pass(0)
			if gone := !pathExists(t, stale); gone != tc.removed {
				t.Fatalf("%s removed: got %v, want %v", stale, gone, tc.removed)
			}
			if !pathExists(t, storage.TopicPath(r.d.DataDir, "orders")) {
				t.Fatal("the successor's directory: got it gone, want it kept")
			}
			if want := map[bool]int{true: 1, false: 0}[tc.removed]; rep.deletedTopics != want {
				t.Fatalf("deleted topics: got %d, want %d", rep.deletedTopics, want)
			}
		})
	}
}

// rule S7: the pass only counts a topic directory without a marker (it
// judges no copy in it and removes nothing); the book lists it.
func TestRuleS7APassOnlyCountsATopicDirectoryWithoutAMarker(t *testing.T) {
	r := newSweepRig(t)
	r.replica.Put(sweepOrders, "n2")
	r.copyOf(sweepOrders0, 3) // no marker: never prepared
	rep := r.pass(0)
	if rep.orphans != 1 {
		t.Fatalf("orphans: got %d, want 1", rep.orphans)
	}
	if !pathExists(t, r.path(sweepOrders0)) {
		t.Fatal("the unmarked directory's copy: got it gone, want it kept")
	}
	if got := r.owners.askedKeys(); len(got) != 0 {
		t.Fatalf("owner asked for: got %v, want nothing", got)
	}
	if s := r.s.book.snapshot(); !slices.Equal(s.orphans, []string{filepath.Join("topics", "orders")}) {
		t.Fatalf("orphans in the book: got %v, want [topics/orders]", s.orphans)
	}
	if got := r.metrics.OrphanTopicDirs.Get(); got != 1 {
		t.Fatalf("narad_orphan_topic_dirs: got %v, want 1", got)
	}
}

// rule S7: the startup sweep removes a topic directory without a marker,
// and sets aside whole, never deleting, one that holds a copy set aside;
// a marked directory it leaves alone.
func TestRuleS7TheStartupSweepRemovesOrphansAndKeepsQuarantine(t *testing.T) {
	r := newSweepRig(t)
	plain := messages.PartitionKey{Topic: "plain", Partition: 0}
	r.appendRecords(r.path(plain), 3)
	held := messages.PartitionKey{Topic: "held", Partition: 0}
	r.appendRecords(r.path(held), 3)
	if _, err := storage.Quarantine(r.path(held)); err != nil {
		t.Fatal(err)
	}
	heldBytes := sweptBytes(t, storage.TopicPath(r.d.DataDir, "held"))
	if _, err := storage.PrepareTopicDir(r.d.DataDir, "orders", 7); err != nil {
		t.Fatal(err)
	}
	r.copyOf(sweepOrders0, 3)

	SweepOrphansAtStart(slog.New(r.logs), r.d.DataDir)
	if pathExists(t, storage.TopicPath(r.d.DataDir, "plain")) {
		t.Fatal("an unmarked topic directory: got it kept, want it removed")
	}
	if pathExists(t, storage.TopicPath(r.d.DataDir, "held")) {
		t.Fatal("an unmarked topic directory holding a quarantined copy: got it at its path, want it set aside")
	}
	aside := filepath.Join(storage.StalePath(r.d.DataDir), "held@unmarked")
	if got := sweptBytes(t, aside); got != heldBytes || !pathExists(t, filepath.Join(aside, "0.quarantine")) {
		t.Fatalf("the set-aside directory %s: got %d bytes, want %d with 0.quarantine in it", aside, got, heldBytes)
	}
	if !pathExists(t, r.path(sweepOrders0)) {
		t.Fatal("a marked topic directory's copy: got it gone, want it kept")
	}
}

// Config.MaxCopiesPerPass: a pass judges at most the limit, and the next
// starts where it stopped (report.next, kept by the actor), so every copy
// is judged within ceil(n/limit) passes.
func TestSweepJudgesAtMostTheLimitPerPassAndResumesWhereItStopped(t *testing.T) {
	const copies, limit = 5, 2
	r := newSweepRig(t, func(c *Config) { c.MaxCopiesPerPass = limit })
	many := messages.Topic{Name: "orders", Incarnation: 7, Partitions: copies}
	r.topic(many, "n2", "n2", "n2", "n2", "n2")
	for p := range copies {
		r.copyOf(messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: p}, 1)
	}
	// The owner cannot be asked: every copy is deferred and stays, so
	// every pass sees the five.
	seen := map[messages.PartitionKey]bool{}
	passes := (copies + limit - 1) / limit
	for i := range passes {
		before := len(r.owners.askedKeys())
		rep := r.pass(r.s.next)
		asked := r.owners.askedKeys()[before:]
		if len(asked) != limit || judgedTotal(rep) != limit {
			t.Fatalf("pass %d: got %d asked, %d judged; want %d", i, len(asked), judgedTotal(rep), limit)
		}
		if !rep.more {
			t.Fatalf("pass %d: got more=false, want true (%d copies, limit %d)", i, copies, limit)
		}
		for _, k := range asked {
			seen[k] = true
		}
	}
	if len(seen) != copies {
		t.Fatalf("copies judged in %d passes: got %d (%v), want all %d", passes, len(seen), seen, copies)
	}
}

// r5Store counts the runner's scans (TargetedAt) over a replica whose

// rule R5's other half, in the sweeper: a Due starts a pass unless
// one is under way (a slow pass skips a turn, it does not queue one), and
// the next pass starts where the last one stopped. The bubble tells when
// the pass's goroutine is blocked in the owner's ask.
func TestSweepASlowPassSkipsATurnAndTheNextContinues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSweepRig(t, func(c *Config) { c.MaxCopiesPerPass = 1 })
		two := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 2}
		r.topic(two, "n2", "n2")
		keys := []messages.PartitionKey{sweepOrders0, {Topic: "orders", Incarnation: 7, Partition: 1}}
		r.copyOf(keys[0], 3) // its owner cannot be asked: deferred, it stays
		ls := r.copyOf(keys[1], 3)
		r.owners.answer(keys[1], movedFromHere(ls, ls.HWM, ls.HWM))
		release := make(chan struct{})
		r.owners.onAsk = func(messages.PartitionKey) { <-release }
		system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(t) }))
		pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return r.s }), Name)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = system.Root.StopFuture(pid).Wait()
			system.Shutdown()
			time.Sleep(time.Minute) // the dead letters' throttle (see rule B7's test)
		}()

		system.Root.Send(pid, Due{})
		synctest.Wait() // the pass waits in the owner's ask
		system.Root.Send(pid, Due{})
		synctest.Wait()
		close(release)
		synctest.Wait()
		if got := r.owners.askedKeys(); !slices.Equal(got, keys[:1]) {
			t.Fatalf("asked while a pass was under way and after: got %v, want %v (the second Due skipped)", got, keys[:1])
		}
		if !pathExists(t, r.path(keys[0])) || !pathExists(t, r.path(keys[1])) {
			t.Fatal("after one pass that deferred the first copy: got a copy gone, want both kept")
		}

		system.Root.Send(pid, Due{})
		synctest.Wait()
		if got := r.owners.askedKeys(); !slices.Equal(got, keys) {
			t.Fatalf("asked after the next Due: got %v, want %v (the next pass starts at the second copy)", got, keys)
		}
		if pathExists(t, r.path(keys[1])) {
			t.Fatal("the second copy after the next pass: got it kept, want it reclaimed")
		}
	})
}
