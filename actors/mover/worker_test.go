package mover

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// workerRig is one move worker, on node n2, moving partition 0 of topic
// "w" from n1, in an actor system of its own: the source is a fake over a
// real partition log, the metastore a fake replica whose flip always
// commits. No NATS, no Raft, no partition actor. Run inside a synctest
// bubble, the worker's timers (re-arm, retry, tick) run on the bubble's
// fake clock.
type workerRig struct {
	t *testing.T
	// d are the worker's Deps but for what start adds (its logger,
	// series, store, source, guarded acts, batcher, supervisor): a test
	// may change them before it starts the worker.
	d       Deps
	key     messages.PartitionKey
	store   *workerStore
	source  *fakeSource
	logs    *recordingHandler
	system  *actor.ActorSystem
	parent  *actor.PID
	ended   chan moveEnded
	holdFin chan struct{} // closed to let the passes under the freeze run
	// partitions, when set, spawns the stand-in partitions supervisor the
	// worker asks around its install (rule K7).
	partitions func(*actor.ActorSystem) *actor.PID
	// carry is what the parent keeps of the move's earlier workers, as the
	// runner does: answered to the worker as it starts, updated as it
	// tells (under carryMu).
	carryMu sync.Mutex
	carry   workerCarry
	// batchInstalls gives the worker the node's install batcher, as a node
	// does (nil otherwise: each copy installs alone); installs is it.
	batchInstalls bool
	installs      *InstallBatcher
}

// newWorkerRig builds the source with records records and the rig; start
// spawns the worker. holdFinal holds every pass under the freeze until
// releaseFinal.
func newWorkerRig(t *testing.T, records int, holdFinal bool) *workerRig {
	t.Helper()
	d := testDeps(t.TempDir())
	d.NodeID = "n2"
	topic := messages.Topic{Name: "w", Incarnation: 7, Partitions: 3, RetentionMs: 3_600_000}
	r := &workerRig{t: t, d: d, key: messages.PartitionKey{Topic: topic.Name, Incarnation: topic.Incarnation},
		store: &workerStore{fakeReplica: newFakeReplica()}, logs: &recordingHandler{},
		ended: make(chan moveEnded, 1), holdFin: make(chan struct{})}
	if !holdFinal {
		close(r.holdFin)
	}
	r.d.Knobs.Pass = func(ctx context.Context, _ messages.PartitionKey, final bool) error {
		if final {
			select {
			case <-r.holdFin:
			case <-ctx.Done():
			}
		}
		return nil
	}
	f := r.store.fakeReplica
	f.Put(topic)
	f.SetMember(messages.Member{ID: "n1", Status: messages.MemberAlive})
	f.SetMember(messages.Member{ID: "n2", Status: messages.MemberAlive})
	f.SetAssignments(messages.Assignment{Topic: topic.Name, Incarnation: topic.Incarnation, Partition: 0, Owner: "n1", Target: "n2", TargetSince: 41})

	l, err := storage.OpenLog(t.TempDir(), d.LogConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range records {
		if _, err := l.Append(time.Now(), []storage.Entry{{Key: fmt.Appendf(nil, "k%d", i), Body: []byte(`"body"`)}}); err != nil {
			t.Fatal(err)
		}
	}
	r.source = &fakeSource{log: l, ttl: d.Move.FreezeTTL, position: messages.ConsumerPosition{Frontier: -1}}
	return r
}

// carried is the V4 count the parent keeps.
func (r *workerRig) carried() int {
	r.carryMu.Lock()
	defer r.carryMu.Unlock()
	return r.carry.verifyFailures
}

// start spawns the worker under a parent that keeps what it reports.
func (r *workerRig) start() {
	r.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(r.t) }))
	d := r.d
	d.Logger, d.Metrics, d.Store, d.Source = slog.New(r.logs), newTestMetrics(), r.store, r.source
	d.Guards = storage.NewGuards()
	d.Dirs = rigDirs{dataDir: d.DataDir, guards: d.Guards, topics: r.store}
	if r.batchInstalls {
		r.installs = NewInstallBatcher(d)
		d.Installs = r.installs
	}
	if r.partitions != nil {
		d.Partitions = r.partitions(r.system)
	}
	worker := actor.PropsFromProducer(func() actor.Actor { return newWorker(d, r.key, "n1", 41) })
	parent, err := r.system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Spawn(worker)
		case moveEnded:
			r.ended <- m
		case carryAsk:
			r.carryMu.Lock()
			ctx.Respond(r.carry)
			r.carryMu.Unlock()
		case carryUpdate:
			r.carryMu.Lock()
			r.carry.verifyFailures = m.verifyFailures
			r.carryMu.Unlock()
		}
	}), "mover")
	if err != nil {
		r.t.Fatal(err)
	}
	r.parent = parent
}

// stop stops the worker (its parent first stops it) and the system.
func (r *workerRig) stop() {
	_ = r.system.Root.StopFuture(r.parent).Wait()
	r.system.Shutdown()
	r.installs.Close()
}

func (r *workerRig) releaseFinal() { close(r.holdFin) }

// installed is the consumer state at the partition's path.
func (r *workerRig) installed() storage.ConsumerState {
	r.t.Helper()
	st, err := storage.LoadConsumerState(storage.PartitionPath(r.d.DataDir, r.key.Topic, r.key.Partition))
	if err != nil {
		r.t.Fatalf("installed consumer state: %v", err)
	}
	return st
}

// workerStore is the fake replica with the leader reads and a flip that
// commits. LeaderAssignment is the replica's own, which answers the
// replica's assignment while no test calls SetLeaderOwner.
type workerStore struct {
	*fakeReplica
	// mu guards the fields below, the replica guards its own.
	mu    sync.Mutex
	flips []messages.Flip
	// leaderMembers, when set, is what the leader has, ahead of the replica.
	leaderMembers []messages.Member
	// refuse: every flip is refused; ownedBy, when set, is who the
	// assignment then names as owner (an earlier attempt's flip).
	refuse  bool
	ownedBy string
}

func (s *workerStore) LeaderMembers(context.Context) ([]messages.Member, error) {
	s.mu.Lock()
	ms := slices.Clone(s.leaderMembers)
	s.mu.Unlock()
	if ms != nil {
		return ms, nil
	}
	return s.Members(), nil
}

func (s *workerStore) CatchUp(context.Context) error { return nil }

func (s *workerStore) Flip(_ context.Context, c messages.Flip) (messages.AssignResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flips = append(s.flips, c)
	// The owner moves under s.mu, so whoever sees the flip recorded sees
	// its owner too; as an applied flip would, it wakes the replica's
	// watchers and moves AssignmentsVersion.
	t := messages.Topic{Incarnation: c.Incarnation}
	if s.refuse {
		if s.ownedBy != "" {
			s.SetOwner(t, c.Partition, s.ownedBy)
		}
		return messages.AssignResult{Code: messages.ResultRefused}, nil
	}
	s.SetOwner(t, c.Partition, c.To)
	return messages.AssignResult{Code: messages.ResultOK}, nil
}

// fakeSource is a move's source: listings and chunks from a real log, and
// a handoff freeze that lapses TTL after the last prepare, re-arm or
// fence it answered, on the caller's clock (the bubble's in a synctest).
type fakeSource struct {
	log *storage.Log
	ttl time.Duration

	mu sync.Mutex
	// position is what a listing reports before the freeze; frozenAt is
	// what the prepare's listing reports (the in-memory frontier, rule F4).
	position, frozenAt messages.ConsumerPosition
	token              string
	until              time.Time
	lapsed             int         // re-arms or fences that found the freeze gone
	renewals           []time.Time // when each prepare, re-arm and fence arrived
	rearms             int
	// unreachable: every handoff fails (the source died after the copy).
	unreachable bool
	// marker is the move marker its listings report (nil: none).
	marker *messages.MoveMarker
	// cursors, when set, gives the cursor sidecars of the n'th listing
	// (from 1; a prepare's included); shipped is the latest listing's.
	cursors  func(n int) [][]byte
	listings int
	shipped  [][]byte
	// asked names each request in the order it came: list, prepare,
	// rearm, fence, release; chunkReads counts the chunk reads.
	asked      []string
	chunkReads int
	// prepareDelay is how long a prepare takes to answer.
	prepareDelay time.Duration
}

func (s *fakeSource) listing(pos messages.ConsumerPosition) *messages.PartitionListing {
	ls, err := s.log.List(time.Now())
	if err != nil {
		return &messages.PartitionListing{Status: messages.StatusFailed, Err: err.Error()}
	}
	out := &messages.PartitionListing{Status: messages.StatusOK, HWM: ls.HWM, Clock: ls.Clock, Position: pos, Marker: s.marker}
	s.listings++
	if s.cursors != nil {
		out.Cursors = s.cursors(s.listings)
		s.shipped = out.Cursors
	}
	for _, sg := range ls.Segments {
		out.Segments = append(out.Segments, messages.SegmentInfo{Name: sg.Name, Base: sg.Base, Size: sg.Size, ModTime: sg.ModTime})
	}
	return out
}

func (s *fakeSource) Ask(_ context.Context, _ messages.PartitionKey, msg any) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	switch m := msg.(type) {
	case *messages.ListPartition:
		s.asked = append(s.asked, "list")
		ls := s.listing(s.position)
		var total int64
		for _, sg := range ls.Segments {
			total += sg.Size
		}
		for i, sg := range ls.Segments {
			if m.InlineBytes > 0 && total <= int64(m.InlineBytes) {
				ls.Segments[i].Data = make([]byte, sg.Size)
				if _, err := s.log.ReadChunk(sg.Name, 0, ls.Segments[i].Data); err != nil {
					return nil, err
				}
			}
		}
		return ls, nil
	case *messages.Handoff:
		s.asked = append(s.asked, [...]string{"prepare", "rearm", "fence", "release"}[m.Op])
		if s.unreachable {
			return nil, fmt.Errorf("fake source: unreachable")
		}
		switch m.Op {
		case messages.HandoffPrepare:
			if s.prepareDelay > 0 {
				s.mu.Unlock()
				time.Sleep(s.prepareDelay)
				s.mu.Lock()
				now = time.Now()
			}
			s.token, s.until = fmt.Sprintf("token-%d", len(s.renewals)), now.Add(s.ttl)
			s.renewals = append(s.renewals, now)
			return &messages.HandoffResult{Status: messages.StatusOK, Token: s.token, Listing: s.listing(s.frozenAt)}, nil
		case messages.HandoffRearm, messages.HandoffFence:
			if m.Op == messages.HandoffRearm {
				s.rearms++
			}
			if m.Token != s.token || !now.Before(s.until) {
				s.lapsed++
				return &messages.HandoffResult{Status: messages.StatusGone, Err: "freeze lapsed"}, nil
			}
			s.until = now.Add(s.ttl)
			s.renewals = append(s.renewals, now)
			return &messages.HandoffResult{Status: messages.StatusOK, Token: s.token}, nil
		case messages.HandoffRelease:
			s.token = ""
			return &messages.HandoffResult{Status: messages.StatusOK}, nil
		}
	}
	return nil, fmt.Errorf("fake source: unexpected %T", msg)
}

// AskAlone is Ask: the fake has no groups.
func (s *fakeSource) AskAlone(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return s.Ask(ctx, k, msg)
}

func (s *fakeSource) ReadChunk(_ context.Context, _ messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	s.mu.Lock()
	s.chunkReads++
	s.mu.Unlock()
	buf := make([]byte, rc.Max)
	n, err := s.log.ReadChunk(rc.Segment, rc.Pos, buf)
	return buf[:n], err
}

// counts are the fake source's re-arms, lapses and renewal times.
func (s *fakeSource) counts() (rearms, lapsed int, renewals []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rearms, s.lapsed, slices.Clone(s.renewals)
}

// recordingHandler keeps every log record, for tests that check a warning.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// count is how many records at level carry msg.
func (h *recordingHandler) count(level slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level && r.Message == msg {
			n++
		}
	}
	return n
}

// rule F7 (worker side): in Finalize the worker re-arms the freeze every
// TTL/4 on its own timer, however long a pass takes. A pass under the
// freeze is held past a whole TTL (moves in the cluster tests end well
// inside it); the worker's re-arms keep the source's freeze alive
// throughout, and the move then fences and flips under the same token.
func TestRuleF7TheWorkerReArmsEveryQuarterTTLThroughALongPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, true)
		ttl := r.d.Move.FreezeTTL
		r.start()
		defer r.stop()
		synctest.Wait() // copied, frozen, the first pass under the freeze held
		_, _, renewals := r.source.counts()
		if len(renewals) != 1 {
			t.Fatalf("renewals before the long pass: got %d, want 1 (the prepare)", len(renewals))
		}
		frozen := renewals[0]

		time.Sleep(ttl + ttl/8) // one pass, held longer than the TTL
		synctest.Wait()
		rearms, lapsed, renewals := r.source.counts()
		if want := 4; rearms != want || lapsed != 0 {
			t.Fatalf("during a pass held %s under a %s freeze: got %d re-arms (%d lapsed), want %d (one every TTL/4), none lapsed",
				time.Since(frozen), ttl, rearms, lapsed, want)
		}
		for i := 1; i < len(renewals); i++ {
			if gap := renewals[i].Sub(renewals[i-1]); gap > ttl/4 {
				t.Fatalf("renewal %d: got %s after the one before, want at most TTL/4 = %s", i, gap, ttl/4)
			}
		}

		r.releaseFinal()
		synctest.Wait()
		select {
		case e := <-r.ended:
			if !e.flipped {
				t.Fatalf("the move: got ended without a flip, want flipped")
			}
		default:
			t.Fatalf("the move after the long pass: got no end, want flipped")
		}
		if _, lapsed, _ := r.source.counts(); lapsed != 0 {
			t.Fatalf("re-arms or fences that found the freeze lapsed: got %d, want 0", lapsed)
		}
	})
}

// runInstall moves the rig's partition to the end and returns the
// consumer state the destination installed.
func runInstall(t *testing.T, r *workerRig) storage.ConsumerState {
	t.Helper()
	r.start()
	defer r.stop()
	synctest.Wait()
	r.wantFlipped(r.source.log.HWM())
	return r.installed()
}

// wantFlipped checks that the worker ended with its flip, the one flip
// proposed, at hwm, for the move set at index 41.
func (r *workerRig) wantFlipped(hwm int64) {
	r.t.Helper()
	select {
	case e := <-r.ended:
		if !e.flipped {
			r.t.Fatal("the move: got ended without a flip, want flipped")
		}
	default:
		r.t.Fatal("the move: got no end, want flipped")
	}
	r.store.mu.Lock()
	flips := slices.Clone(r.store.flips)
	r.store.mu.Unlock()
	if len(flips) != 1 || flips[0].HWM == nil || *flips[0].HWM != hwm || flips[0].TargetSince != 41 {
		r.t.Fatalf("flips: got %+v, want one at HWM %d for the move set at index 41", flips, hwm)
	}
}

// rule K5 (destination side): the committed consumer offset and the
// acked-ahead offsets the freeze reported move with the data: the
// destination installs exactly the prepare's position, not an earlier
// pass's. (In-flight leases are not in a position at all: the source
// leaves them out of its listing, TestRuleK5TheListingCarriesAcksNotLeases.)
func TestRuleK5TheDestinationInstallsTheFrozenPosition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 8, false)
		r.source.position = messages.ConsumerPosition{Frontier: 0, AckedAhead: []int64{3}}
		r.source.frozenAt = messages.ConsumerPosition{Frontier: 1, AckedAhead: []int64{3, 5}}
		got := runInstall(t, r)
		if want := (storage.ConsumerState{Frontier: 1, AckedAhead: []int64{3, 5}}); !got.Equal(want) {
			t.Fatalf("installed consumer state: got %+v, want %+v (the prepare's frontier and acked-ahead)", got, want)
		}
		if n := r.logs.count(slog.LevelWarn, moveClampedWarning); n != 0 {
			t.Fatalf("clamp warnings: got %d, want 0 (the position is below the HWM)", n)
		}
	})
}

// Issue 46: the freeze holds only the tail, the fence and the flip. The
// first final pass copies to the listing the prepare answered with, read
// under that freeze, and for a partition nobody writes to it is quiet, so
// the fence is rule F8's second quiet pass: no listing between the prepare
// and the fence. The copy was staged before the prepare, so the install
// under the freeze only renamed it: its marker was made durable before the
// source froze.
func TestTheFreezeHoldsOnlyTheFenceAndTheFlipOfAnIdlePartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		r.source.prepareDelay = time.Millisecond
		r.source.frozenAt = r.source.position // nobody consumes either
		verifies := r.recordVerifies()
		r.start()
		defer r.stop()
		r.waitFlipped(100 * time.Millisecond)
		r.source.mu.Lock()
		asked := slices.Clone(r.source.asked)
		prepared := r.source.renewals[0]
		r.source.mu.Unlock()
		prep, fence := slices.Index(asked, "prepare"), slices.Index(asked, "fence")
		if prep < 1 || fence < prep || asked[0] != "list" {
			t.Fatalf("requests: got %v, want a catch-up listing, then a prepare, then a fence", asked)
		}
		if between := asked[prep+1 : fence]; len(between) != 0 {
			t.Fatalf("requests between the prepare and the fence: got %v, want none", between)
		}
		m, err := storage.ReadMarker(storage.PartitionPath(r.d.DataDir, r.key.Topic, r.key.Partition))
		if err != nil {
			t.Fatal(err)
		}
		if !m.DurableAt.Before(prepared) {
			t.Fatalf("installed marker durable at %s, want before the prepare at %s (staged before the freeze)", m.DurableAt, prepared)
		}
		// Verified at the stage, untouched since: not read again under
		// the freeze.
		if got := verifies(); !slices.Equal(got, []verifyCall{{hwm: 5, read: false}}) {
			t.Fatalf("verifies before the fence: got %+v, want one at 5 that reads nothing", got)
		}
	})
}

// waitFlipped lets the bubble's time pass a millisecond at a time, up to
// bound, so that a source's prepareDelay runs out, until the move ends,
// and fails unless it ended with a flip.
func (r *workerRig) waitFlipped(bound time.Duration) {
	r.t.Helper()
	for waited := time.Duration(0); waited < bound; waited += time.Millisecond {
		time.Sleep(time.Millisecond)
		synctest.Wait()
		select {
		case e := <-r.ended:
			if !e.flipped {
				r.t.Fatal("the move: got ended without a flip, want flipped")
			}
			return
		default:
		}
	}
	r.t.Fatalf("the move: got no end after %s, want flipped", bound)
}

// verifyCall is one verify of a copy before its fence (Knobs.Verify).
type verifyCall struct {
	hwm  int64
	read bool
}

// recordVerifies records the worker's verifies before the fence, returned
// by the function it gives back.
func (r *workerRig) recordVerifies() func() []verifyCall {
	var mu sync.Mutex
	var calls []verifyCall
	r.d.Knobs.Verify = func(_ messages.PartitionKey, hwm int64, read bool) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, verifyCall{hwm, read})
	}
	return func() []verifyCall {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

// A tail copied under the freeze takes the copy out of its staged state:
// the verify before the fence reads it whole again, at the new HWM.
func TestATailCopiedUnderTheFreezeIsVerifiedByReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		r.source.prepareDelay = time.Millisecond
		verifies := r.recordVerifies()
		r.start()
		defer r.stop()
		synctest.Wait() // staged at 5; the prepare waits at the source
		if _, err := r.source.log.Append(time.Now(), []storage.Entry{{Body: []byte(`"tail"`)}}); err != nil {
			t.Fatal(err)
		}
		r.waitFlipped(100 * time.Millisecond)
		if got := verifies(); !slices.Equal(got, []verifyCall{{hwm: 6, read: true}}) {
			t.Fatalf("verifies before the fence: got %+v, want one at 6 that reads the copy", got)
		}
	})
}

// A partition of a few records comes whole in its listing: its move
// reads no chunk, and the copy it installs is the source's, verified.
// With MoveInlineBytes 0 the same move reads its bytes in chunks.
func TestASmallPartitionMovesWithoutAChunkRead(t *testing.T) {
	for _, inline := range []int{2 << 10, 0} {
		t.Run(fmt.Sprintf("inline=%d", inline), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newWorkerRig(t, 5, false)
				r.d.Config.InlineBytes = inline
				runInstall(t, r)
				r.source.mu.Lock()
				reads := r.source.chunkReads
				r.source.mu.Unlock()
				if inline > 0 && reads != 0 {
					t.Fatalf("chunk reads with the bytes inline: got %d, want 0", reads)
				}
				if inline == 0 && reads == 0 {
					t.Fatal("chunk reads with nothing inline: got 0, want the copy read in chunks")
				}
			})
		})
	}
}

// moveClampedWarning is what install logs when it lowered a frontier.
const moveClampedWarning = "move: consumer position past the copy's high watermark; clamped"

// rule K6: the destination installs a frontier of at most HWM-1 and only
// acked-ahead offsets below the HWM, and warns when it lowered the
// frontier; acked-ahead offsets it drops are no warning.
func TestRuleK6TheDestinationClampsThePositionToTheHWM(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pos    messages.ConsumerPosition
		want   storage.ConsumerState
		warned int
	}{
		{"frontier past the HWM", messages.ConsumerPosition{Frontier: 9, AckedAhead: []int64{11, 12}},
			storage.ConsumerState{Frontier: 4}, 1},
		{"frontier at the HWM", messages.ConsumerPosition{Frontier: 5},
			storage.ConsumerState{Frontier: 4}, 1},
		{"frontier at HWM-1 is the whole log consumed", messages.ConsumerPosition{Frontier: 4},
			storage.ConsumerState{Frontier: 4}, 0},
		{"acked-ahead at and past the HWM", messages.ConsumerPosition{Frontier: 0, AckedAhead: []int64{2, 4, 5, 6}},
			storage.ConsumerState{Frontier: 0, AckedAhead: []int64{2, 4}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newWorkerRig(t, 5, false) // HWM 5
				r.source.frozenAt = tc.pos
				got := runInstall(t, r)
				if !got.Equal(tc.want) {
					t.Fatalf("installed consumer state at HWM 5 from %+v: got %+v, want %+v", tc.pos, got, tc.want)
				}
				if n := r.logs.count(slog.LevelWarn, moveClampedWarning); n != tc.warned {
					t.Fatalf("clamp warnings: got %d, want %d", n, tc.warned)
				}
			})
		})
	}
}

// rule P2 on a stale replica: the source died after the copy, came back
// unseen by this node's replica (its heartbeat counter moved on the
// leader), and died again. The worker promotes only on the leader's
// reading and restarts its own clock on the moved counter: no promote
// while the replica is stale, one two minutes after it caught up. Found by
// the move simulator (actors/move/sim, break P2).
func TestRuleP2TheWorkerConfirmsAPromoteWithTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		r.source.unreachable = true // the pass copies all; the freeze never answers
		f := r.store.fakeReplica
		f.SetMember(messages.Member{ID: "n1", Status: messages.MemberDead, Heartbeats: 5})
		r.store.mu.Lock()
		r.store.leaderMembers = []messages.Member{{ID: "n1", Status: messages.MemberDead, Heartbeats: 9}, {ID: "n2", Status: messages.MemberAlive}}
		r.store.mu.Unlock()
		flips := func() []messages.Flip {
			r.store.mu.Lock()
			defer r.store.mu.Unlock()
			return slices.Clone(r.store.flips)
		}
		r.start()
		defer r.stop()

		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := flips(); len(got) != 0 {
			t.Fatalf("with the replica's record stale (counter 5, the leader's 9): got flips %+v, want none", got)
		}

		// The replica catches up: the same death, seen the same by both.
		f.SetMember(messages.Member{ID: "n1", Status: messages.MemberDead, Heartbeats: 9})
		time.Sleep(r.d.Move.ForcePromoteAfter + 10*time.Second)
		synctest.Wait()
		got := flips()
		if len(got) != 1 || got[0].From != "n1" || got[0].To != "n2" {
			t.Fatalf("after the replica caught up and ForcePromoteAfter passed: got flips %+v, want one force-promote n1 -> n2", got)
		}
	})
}

// rule P2's clock is the worker's Deps.Clock, not the machine's: with a
// clock that only a test moves, no time passes for the gate however long
// the source stays dead by the machine's clock, and a promote comes once
// that clock has moved ForcePromoteAfter past the death. (So the node
// must hand the worker a clock that is never stepped: Deps.Clock.)
func TestRuleP2TheGateRunsOnTheWorkersClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 5, false)
		c := testnet.NewClock()
		r.d.Clock = c
		r.source.unreachable = true // the pass copies all; the freeze never answers
		dead := messages.Member{ID: "n1", Status: messages.MemberDead, Heartbeats: 9}
		r.store.fakeReplica.SetMember(dead)
		r.store.mu.Lock()
		r.store.leaderMembers = []messages.Member{dead, {ID: "n2", Status: messages.MemberAlive}}
		r.store.mu.Unlock()
		flips := func() int {
			r.store.mu.Lock()
			defer r.store.mu.Unlock()
			return len(r.store.flips)
		}
		r.start()
		defer r.stop()

		time.Sleep(2 * r.d.Move.ForcePromoteAfter)
		synctest.Wait()
		if n := flips(); n != 0 {
			t.Fatalf("after twice ForcePromoteAfter on the machine's clock and none on the worker's: got %d flips, want none", n)
		}
		// The worker's clock moves a tick at a time, as a wall clock does.
		for moved := time.Duration(0); moved < r.d.Move.ForcePromoteAfter+10*time.Second && flips() == 0; moved += r.d.Tick {
			c.Advance(r.d.Tick)
			synctest.Wait()
		}
		if n := flips(); n != 1 {
			t.Fatalf("after ForcePromoteAfter on the worker's clock: got %d flips, want one force-promote", n)
		}
	})
}

// issue 26: the event order of the bulk hand-off run that lost a whole
// partition, on a real worker with the node's install batcher. The
// source restarts under the move (its freeze gone, re-armed with a stale
// token): a pass of the old freeze is still out when the worker freezes
// again, and a pass of the new freeze fails. Whatever the worker makes of
// that, the copy it flips to must be at the partition's path, whole.
func TestAMoveWhoseSourceRestartsMidFinalizeFlipsOnlyToItsWholeCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const records = 4
		r := newWorkerRig(t, records, false)
		r.batchInstalls = true
		// An install waits long enough for a retry to join its batch, as
		// it does behind a backed-up batcher in a bulk move.
		r.d.Config.InstallBatchWindow = time.Second
		r.d.Move.RetryAfter = 300 * time.Millisecond
		// Final passes by the order they start: the first (old freeze)
		// and the second and third (new freeze) wait for the test; the
		// second fails.
		gates := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
		var mu sync.Mutex
		finals, running, mostRunning := 0, 0, 0
		r.d.Knobs.Pass = func(ctx context.Context, _ messages.PartitionKey, final bool) error {
			if !final {
				return nil
			}
			mu.Lock()
			n := finals
			finals++
			running++
			mostRunning = max(mostRunning, running)
			mu.Unlock()
			defer func() {
				mu.Lock()
				running--
				mu.Unlock()
			}()
			if n >= len(gates) {
				return nil
			}
			select {
			case <-gates[n]:
			case <-ctx.Done():
				return ctx.Err()
			}
			if n == 1 {
				return fmt.Errorf("listing lost")
			}
			return nil
		}
		r.start()
		defer r.stop()
		synctest.Wait() // copied, frozen, the first final pass out

		// The source restarts: the freeze the worker holds is gone.
		r.source.mu.Lock()
		r.source.token = ""
		r.source.mu.Unlock()
		time.Sleep(r.d.Move.FreezeTTL / 4) // the re-arm finds it gone: freeze again
		synctest.Wait()
		for _, g := range gates {
			close(g)
			synctest.Wait()
		}
		select {
		case <-r.ended:
		case <-time.After(time.Minute):
			t.Fatal("the move did not end within a minute")
		}
		if len(r.store.flips) == 0 {
			t.Fatal("the move ended without a flip")
		}
		if mostRunning > 1 {
			t.Errorf("passes on the staging copy at once: got %d, want 1 (storage.Staging is not safe for concurrent use)", mostRunning)
		}
		path := storage.PartitionPath(r.d.DataDir, r.key.Topic, r.key.Partition)
		ls, err := storage.ListClosed(path, r.d.LogConfig, time.Now())
		qs, _ := filepath.Glob(path + ".quarantine*")
		if err != nil || ls.HWM != records || len(qs) != 0 {
			t.Fatalf("after the flip, the partition's path: got hwm %d (%v) and copies set aside %v, want hwm %d and none set aside",
				ls.HWM, err, qs, records)
		}
	})
}
