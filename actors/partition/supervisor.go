package partition

import (
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Reconcile asks the partitions supervisor to compare the partitions it
// runs with those the metastore says this node owns.
type Reconcile struct{}

// Reconciled answers a Reconcile sent as a request: the partitions owned
// here as of the local replica have running actors.
type Reconciled struct{}

// RetentionTick asks every partition to apply its topic's retention.
type RetentionTick struct{}

// Supervisor supervises one child per partition this node owns. It
// reconciles on every metastore change: it spawns a child for a partition
// newly owned here and stops the child of one no longer owned. The data of
// a deleted topic is removed once its children stopped.
type Supervisor struct {
	deps     Deps
	store    Store
	children map[messages.PartitionKey]*actor.PID
	// byPID names each child's partition by its PID's id: a node handing
	// off 10,000 partitions gets a Terminated per child, and finding each
	// by a walk over the children was a third of its CPU.
	byPID map[string]messages.PartitionKey
	// rest holds the partitions this node owns whose actor rests (rest.go):
	// no actor, a closed door, and what retention needs to wake them.
	rest map[messages.PartitionKey]atRest
	// woken holds the partitions woken from rest whose actor has not yet
	// opened its log (opened): one that keeps failing to open goes back
	// to rest, for the next request to try again, rather than being given
	// up on. A wake is an open, and an open is what a passing disk fault
	// fails (issue 50's chaos run: 22 partitions given up on under
	// injected fsync failures, their records held in the WALs).
	woken map[messages.PartitionKey]bool
	// stoppingRest holds the actors stopped to rest whose end (Terminated)
	// has not come: their name is taken until it does, and a stop waits
	// for the close's syncs, which a slow or failing disk holds for long
	// (issue 50's chaos run: a wake spawned beside a stop that had not
	// ended, "name exists", 73,852 times). Not awaited: the supervisor
	// serves the node's other partitions meanwhile.
	stoppingRest map[messages.PartitionKey]*actor.PID
	// wakeWaiters are the wakes of partitions in stoppingRest, answered
	// once the stop ended and the partition was started again;
	// dropWaiters, the DropEarlier asks, answered once it ended (rule K7:
	// no install while an earlier ownership's actor still closes).
	wakeWaiters, dropWaiters map[messages.PartitionKey][]*actor.PID
	// failed holds partitions whose actor kept failing and was stopped;
	// they are not respawned until the topic changes (an operator looks).
	failed map[messages.PartitionKey]bool
	stop   chan struct{}
	// changes coalesces the replica's changes into reconciles.
	changes metastore.ChangeWatch
	// stopping is set once the supervisor itself stops.
	stopping bool
	// retrying: a reconcile is scheduled after a failed preparation.
	retrying bool
	// owned is read by the partitions-owned gauge at scrape time.
	owned *atomic.Int64
	// linksSent is the signature of the fan-out links each child was
	// last told (fanout.LinksSignature).
	linksSent map[messages.PartitionKey]string
	// ownedBuf and want are each reconcile's scratch, kept between passes:
	// a bulk move's destination reconciles up to 50 times a second over
	// thousands of partitions, and building them afresh each time was a
	// quarter of its CPU with the GC it caused (issue 27's profile).
	ownedBuf []messages.Assignment
	want     map[messages.PartitionKey]bool
	// topicsAt is the topics version the last pass read; the children
	// were told their links at its Existing (linksTold: they were told
	// once). Links change only with records that existed, and walking
	// every child at each of a bulk move's reconciles was a twentieth of a
	// destination's CPU.
	topicsAt  metastore.TopicsVersion
	linksTold bool
	// unmatched holds, by incarnation and partition, the partitions owned
	// here whose assignment a pass read before its topic record: this
	// replica applies the metadata shard and the assignment shards apart,
	// so a create's assignments may come first. A create (the topics
	// version's Any) looks at them again rather than at every partition.
	// At most one entry a partition owned here, as want.
	unmatched map[messages.PartitionKey]bool
	// cursor is how far the passes followed the owner changes; wholeNext
	// asks the next pass to read every owned partition (a spawn or a
	// preparation failed: the journal will not name it again).
	cursor    metastore.OwnerCursor
	wholeNext bool
	// passed: the first pass ran. What it finds owned here starts at rest
	// when partitions rest (startCold): a node's start opens none of its
	// logs, and each opens with its first request (issue 50: 72,688
	// partitions took 12.3 s to /readyz, every one opened).
	passed bool
	// toSurvey holds the partitions started at rest whose figures nobody
	// read yet, in the first pass's order; surveying, those a survey
	// woke whose log has not opened (survey).
	toSurvey  []messages.PartitionKey
	surveying map[messages.PartitionKey]bool
}

// SupervisorName is the supervisor's name under the node's actor system
// root.
const SupervisorName = "partitions"

// NewSupervisor is the partitions supervisor of a node: d its deps, store
// the metastore's local replica; it keeps owned at the count of the
// partitions it runs (the node's partitions-owned gauge reads it).
func NewSupervisor(d Deps, store Store, owned *atomic.Int64) *Supervisor {
	return &Supervisor{deps: d, store: store, children: map[messages.PartitionKey]*actor.PID{},
		failed: map[messages.PartitionKey]bool{}, owned: owned, changes: metastore.ChangeWatch{Clock: d.Steady}}
}

// childName is a partition actor's name under the supervisor. It holds
// the incarnation, not the topic name, so that a recreated topic never
// reaches its predecessor's actor.
func childName(k messages.PartitionKey) string {
	return "p:" + strconv.FormatUint(k.Incarnation, 10) + ":" + strconv.Itoa(k.Partition)
}

// PID is the address of a partition's actor on this node.
func PID(sys *actor.ActorSystem, k messages.PartitionKey) *actor.PID {
	return actor.NewPID(sys.Address(), SupervisorName+"/"+childName(k))
}

func (s *Supervisor) Receive(ctx actor.Context) {
	defer supervise.LogPanic(s.deps.Logger, SupervisorName)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.watch(ctx)
		s.reconcile(ctx)
		s.survey(ctx)
	case *actor.Stopping:
		s.stopping = true
		close(s.stop)
	case Reconcile:
		s.reconcile(ctx)
		s.survey(ctx)
		if ctx.Sender() != nil {
			ctx.Respond(Reconciled{})
		}
	case RetentionTick:
		s.retain(ctx)
	case messages.DropEarlier:
		if d, now := s.dropEarlier(ctx, m.Key); now {
			ctx.Respond(d)
		}
	case *actor.Terminated:
		s.terminated(ctx, m)
		s.survey(ctx)
	case resting:
		s.rested(ctx, m)
	case Wake:
		if w, now := s.wake(ctx, m.Key); now {
			ctx.Respond(w)
		}
	case opened:
		if pid, ok := s.children[m.key]; ok && pid.Equal(m.pid) {
			delete(s.woken, m.key)
			delete(s.surveying, m.key)
		}
		s.survey(ctx)
	}
}

// watch turns metastore changes into reconcile messages. The goroutine
// ends when the supervisor stops.
func (s *Supervisor) watch(ctx actor.Context) {
	s.stop = make(chan struct{})
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.changes.Start(s.store, s.stop, func() { root.Send(self, Reconcile{}) })
}

// reconcile brings the children in line with what this node owns: a whole
// pass over every partition it owns when a topic record that existed may
// have changed (a delete, an alter, fan-out links: the topics version's
// Existing, which neither heartbeats nor the creates of new topics move),
// after a failed spawn or preparation, or when the owner journal no
// longer holds what changed; otherwise a pass over the partitions whose
// owner changed since the last one, and those whose topic a create just
// brought (unmatched). Heartbeats move the metadata shard a few times a
// second, and a whole pass each time cost a node of 100,000 partitions CPU
// while idle; a whole pass per create made 3,000 creates onto such nodes
// quadratic (issue 50); a bulk move's destination reconciles up to 50
// times a second, and a whole pass over its 10,000-20,000 partitions each
// time was a quarter of its CPU (issue 27's profile).
func (s *Supervisor) reconcile(ctx actor.Context) {
	s.changes.Handled()
	s.retrying = false
	if s.linksSent == nil {
		s.linksSent = map[messages.PartitionKey]string{}
	}
	// Read before the links and owners are: a topic change after it moves
	// it again, and its own reconcile looks then.
	at := s.store.TopicsVersion()
	if s.linksTold && at.Existing == s.topicsAt.Existing && !s.wholeNext && s.reconcileChanges(ctx, at.Any != s.topicsAt.Any) {
		s.topicsAt = at
		s.owned.Store(int64(s.ownedCount()))
		return
	}
	s.wholeNext = false
	// Marked before the read: a change during it comes again next pass.
	s.store.MarkOwners(&s.cursor)
	s.reconcileWhole(ctx)
	if !s.linksTold || at.Existing != s.topicsAt.Existing {
		s.tellLinks(ctx)
		s.linksTold = true
	}
	s.topicsAt = at
	s.owned.Store(int64(s.ownedCount()))
}

// reconcileWhole compares every partition this node owns with the children.
func (s *Supervisor) reconcileWhole(ctx actor.Context) {
	if f := s.deps.Knobs.WholePass; f != nil {
		f()
	}
	s.ownedBuf = s.store.AppendOwnedBy(s.deps.NodeID, s.ownedBuf[:0])
	// want maps each partition this node owns to whether a move targets it.
	if s.want == nil {
		s.want = make(map[messages.PartitionKey]bool, len(s.ownedBuf))
	}
	want := s.want
	clear(want)
	clear(s.unmatched)
	topics := metastore.TopicKeys{Topics: s.store}
	for _, a := range s.ownedBuf {
		if k, ok := topics.Key(a); ok {
			want[k] = a.Target != ""
		} else {
			s.unmatch(a)
		}
	}
	var leaving []messages.PartitionKey
	for k := range s.children {
		if _, ok := want[k]; !ok {
			leaving = append(leaving, k)
		}
	}
	s.handOver(ctx, leaving)
	for k := range s.rest {
		if _, ok := want[k]; !ok {
			s.forgetRest(k)
		}
	}
	for k := range s.failed {
		if _, ok := want[k]; !ok {
			delete(s.failed, k)
		}
	}
	// Without doors (a nil Running) nothing could wake a partition.
	cold := !s.passed && s.deps.Config.RestAfter > 0 && s.deps.Running != nil
	s.passed = true
	fansOut := map[uint64]bool{}
	for k, targeted := range want {
		if !cold || targeted {
			s.spawn(ctx, k, targeted)
			continue
		}
		// A partition a move targets opens now, frozen (a flip on its way
		// may count on the freeze this node held before it stopped), and
		// one with fan-out links opens to forward what its children lack.
		if !s.fansOut(fansOut, k) {
			s.startCold(k)
			continue
		}
		s.spawn(ctx, k, targeted)
	}
}

// reconcileChanges compares the partitions whose owner changed since the
// last pass with the children, and, when a topic was created since
// (created), those whose topic record was missing (unmatched); false when
// it cannot (the journal lost some changes, or a partition was deleted: a
// whole pass finds its child by the topic it no longer has), and the
// caller makes a whole pass.
func (s *Supervisor) reconcileChanges(ctx actor.Context, created bool) bool {
	changed, ok := s.store.OwnerChangesSince(&s.cursor, s.ownedBuf[:0])
	s.ownedBuf = changed
	if !ok {
		return false
	}
	for _, a := range changed {
		if a.Topic == "" {
			return false // deleted: the cursor moved on, the whole pass sees the rest
		}
	}
	if created {
		for id := range s.unmatched {
			if a, ok := s.store.Assignment(id.Incarnation, id.Partition); ok {
				changed = append(changed, a)
			} else {
				delete(s.unmatched, id)
			}
		}
		s.ownedBuf = changed
	}
	topics := metastore.TopicKeys{Topics: s.store}
	var leaving []messages.PartitionKey
	if s.want == nil {
		s.want = map[messages.PartitionKey]bool{}
	}
	clear(s.want)
	var fresh []messages.PartitionKey
	for _, a := range changed {
		k, current := topics.Key(a)
		if !current {
			// No child of it: its topic record has not come (a create
			// looks again) or changed (a whole pass follows).
			s.unmatch(a)
			continue
		}
		delete(s.unmatched, messages.PartitionKey{Incarnation: a.Incarnation, Partition: a.Partition})
		if a.Owner == s.deps.NodeID {
			s.want[k] = a.Target != ""
			if a.Target == "" && a.FlippedFrom == "" && a.Floor == 0 {
				fresh = append(fresh, k) // created here, as far as the assignment tells
			}
			continue
		}
		delete(s.want, k) // owned earlier in this list, not any more
		if _, running := s.children[k]; running && !slices.Contains(leaving, k) {
			leaving = append(leaving, k)
		}
		if _, ok := s.rest[k]; ok {
			s.forgetRest(k)
		}
		delete(s.failed, k)
	}
	s.handOver(ctx, leaving)
	var fansOut map[uint64]bool
	if len(fresh) > 0 {
		fansOut = map[uint64]bool{}
	}
	for _, k := range fresh {
		if targeted, ok := s.want[k]; ok && !targeted && s.startEmpty(k, fansOut) {
			delete(s.want, k)
		}
	}
	for k, targeted := range s.want {
		s.spawn(ctx, k, targeted)
	}
	return true
}

// startEmpty leaves k, a partition just created on this node, at rest
// without ever opening it, and reports whether it did: its door closed
// with the stats of an empty partition, drained, so a stats read or a
// lease is answered at the door and its first commit opens it as a wake
// does. Creating a partition cost its node a directory, a segment file,
// their syncs and an actor before anyone wrote to it, and 300,000 of them
// took the cluster 128-169 s (issue 50). Only a partition with no
// directory is started so (nothing on disk: empty is the truth), only
// while partitions rest (RestAfter) with doors to wake them, and not one
// whose topic fans out (it opens to forward, as at a start).
func (s *Supervisor) startEmpty(k messages.PartitionKey, fansOut map[uint64]bool) bool {
	if !s.deps.Config.CreatedAtRest || s.deps.Config.RestAfter <= 0 || s.deps.Running == nil || s.failed[k] {
		return false
	}
	if _, running := s.children[k]; running {
		return false
	}
	if _, ok := s.rest[k]; ok {
		return false
	}
	if _, ok := s.stoppingRest[k]; ok {
		return false
	}
	if s.fansOut(fansOut, k) {
		return false
	}
	if s.deps.Running.Has(k) || s.deps.Running.Resting(k) {
		return false // a door from an earlier life here: a pass handles it
	}
	if !storage.LogAbsent(s.deps.LogConfig, storage.PartitionPath(s.deps.DataDir, k.Topic, k.Partition)) {
		return false // something is there (or cannot be told): an open reads it
	}
	if s.rest == nil {
		s.rest = map[messages.PartitionKey]atRest{}
	}
	s.rest[k] = atRest{} // no segment: nothing for retention
	s.deps.Running.closeEmpty(k)
	return true
}

// fansOut reports whether k's topic has fan-out links, read once a topic
// a pass into seen: a look-up copies the topic record, and a pass may
// cover 100,000 partitions of a few thousand topics.
func (s *Supervisor) fansOut(seen map[uint64]bool, k messages.PartitionKey) bool {
	fans, ok := seen[k.Incarnation]
	if !ok {
		fans = len(fanout.LinksOf(s.store, k)) > 0
		seen[k.Incarnation] = fans
	}
	return fans
}

// unmatch keeps a, read with no current topic record, for a create to
// look at again when this node owns it, and forgets it when not.
func (s *Supervisor) unmatch(a messages.Assignment) {
	id := messages.PartitionKey{Incarnation: a.Incarnation, Partition: a.Partition}
	if a.Owner != s.deps.NodeID {
		delete(s.unmatched, id)
		return
	}
	if s.unmatched == nil {
		s.unmatched = map[messages.PartitionKey]bool{}
	}
	s.unmatched[id] = true
}

// spawn starts k's actor unless it runs or its supervisor gave up on it.
func (s *Supervisor) spawn(ctx actor.Context, k messages.PartitionKey, targeted bool) {
	if _, running := s.children[k]; running || s.failed[k] {
		return
	}
	if _, ok := s.rest[k]; ok {
		return // woken by the next request to it (wake), not by a pass
	}
	if _, ok := s.stoppingRest[k]; ok {
		return // its name is taken until the stop ends (restStopped)
	}
	if err := s.deps.guard().PrepareTopicDir(s.store, k); err != nil {
		// Refused under the guard (a partition of the deleted
		// incarnation still closing, a record not caught up) or
		// failed: try again shortly, a change may not come.
		s.deps.Logger.Error("prepare topic directory", "topic", k.Topic, "err", err)
		s.retryLater(ctx)
		return
	}
	// Every actor shares the supervisor's Deps: a copy each was 1.5 KB of
	// the 7 KB an idle partition held (issue 50), one in the actor and one
	// in the producer's closure. Nothing writes s.deps after New.
	d, dir, owners := &s.deps, storage.PartitionPath(s.deps.DataDir, k.Topic, k.Partition), Owners(s.store)
	// The links and the move are read at each production, so a restarted
	// actor anchors the links of the moment, not those of its first
	// spawn, and opens frozen when a move targets it now: a move is
	// planned long after its partition's actor started, and an actor that
	// restarts between the fence and the flip and opens unfrozen takes
	// commits the flip leaves behind.
	store := s.store
	var restarted atomic.Bool
	props := actor.PropsFromProducer(func() actor.Actor {
		moving := targeted
		a, ok := store.Assignment(k.Incarnation, k.Partition)
		if restarted.Swap(true) {
			moving = ok && a.Target != ""
		}
		p := newActor(d, k, dir, owners, moving, fanout.LinksOf(store, k))
		p.floor = a.Floor
		return p
	})
	if d.Mailboxes != nil {
		props.Configure(actor.WithDispatcher(d.Mailboxes))
	}
	pid, err := ctx.SpawnNamed(props, childName(k))
	if err != nil {
		s.deps.Logger.Error("spawn partition", "partition", k, "err", err)
		s.wholeNext = true // the next change retries it, as a whole pass would
		return
	}
	// Not watched: a parent hears of its child's end (Terminated) all the
	// same, and a watch gave every child a watcher set, 650 bytes an idle
	// partition (issue 50).
	s.children[k] = pid
	s.deps.Running.add(k)
	if s.byPID == nil {
		s.byPID = map[string]messages.PartitionKey{}
	}
	s.byPID[pid.Id] = k
	s.linksSent[k] = fanout.LinksSignature(fanout.LinksOf(s.store, k))
}

// tellLinks tells each partition actor its topic's fan-out links when they
// changed since it was last told (an attach, a detach, a child deleted).
func (s *Supervisor) tellLinks(ctx actor.Context) {
	// One look-up and signature per topic, not per partition: a bulk move
	// reconciles thousands of partitions of a few topics, often.
	type topicLinks struct {
		links []messages.ChildLink
		sig   string
	}
	byTopic := map[uint64]topicLinks{}
	for k, pid := range s.children {
		tl, ok := byTopic[k.Incarnation]
		if !ok {
			tl.links = fanout.LinksOf(s.store, k)
			tl.sig = fanout.LinksSignature(tl.links)
			byTopic[k.Incarnation] = tl
		}
		links, sig := tl.links, tl.sig
		if sig == s.linksSent[k] {
			continue
		}
		s.linksSent[k] = sig
		ctx.Send(pid, fanout.Links{Links: links})
	}
}

// dropEarlier stops k's actor when it still runs and this node does not
// own k: the state of an earlier ownership, leases and acks in memory,
// must not survive into the one an install starts (rule K7, the mover's
// messages.DropEarlier). now is false when the answer waits for the end of
// an actor stopped to rest (restStopped).
func (s *Supervisor) dropEarlier(ctx actor.Context, k messages.PartitionKey) (d messages.DroppedEarlier, now bool) {
	if _, ok := s.stoppingRest[k]; ok && ctx.Sender() != nil {
		if s.dropWaiters == nil {
			s.dropWaiters = map[messages.PartitionKey][]*actor.PID{}
		}
		s.dropWaiters[k] = append(s.dropWaiters[k], ctx.Sender())
		return messages.DroppedEarlier{}, false
	}
	return s.dropEarlierNow(ctx, k), true
}

// dropEarlierNow is dropEarlier of a partition with no actor stopping to
// rest.
func (s *Supervisor) dropEarlierNow(ctx actor.Context, k messages.PartitionKey) messages.DroppedEarlier {
	if _, running := s.children[k]; !running {
		if _, ok := s.rest[k]; ok {
			if a, ok := s.store.Assignment(k.Incarnation, k.Partition); !ok || a.Owner != s.deps.NodeID {
				s.forgetRest(k) // nothing in memory to drop
				s.owned.Store(int64(s.ownedCount()))
			}
		}
		return messages.DroppedEarlier{}
	}
	if a, ok := s.store.Assignment(k.Incarnation, k.Partition); ok && a.Owner == s.deps.NodeID {
		return messages.DroppedEarlier{} // served now: not an earlier ownership
	}
	s.handOver(ctx, []messages.PartitionKey{k})
	s.owned.Store(int64(s.ownedCount()))
	return messages.DroppedEarlier{Stopped: true}
}

// retryLater reconciles again after a MoveTick, once however many
// partitions asked for it.
func (s *Supervisor) retryLater(ctx actor.Context) {
	s.wholeNext = true // the partitions it retries are not in the journal
	if s.retrying {
		return
	}
	s.retrying = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	clock.Or(s.deps.Steady).AfterFunc(s.deps.MoveTick, func() { root.Send(self, Reconcile{}) })
}

// handOver stops the actors of partitions this node no longer owns, all
// at once: a bulk move hands hundreds over in one pass, and each close
// waits for its own fsyncs. Each is first told, when a flip took it away,
// the HWM its new owner's copy ends at (records past it would exist
// nowhere else); the answers are awaited, since a stop is a system message
// and would overtake the telling. Then every stop is awaited: a log must be
// closed before a deleted topic's files go.
func (s *Supervisor) handOver(ctx actor.Context, keys []messages.PartitionKey) {
	if len(keys) == 0 {
		return
	}
	// Their freezes count no more (rule B5): the flip that took them
	// committed, and the pacer's room is what the next moves off this node
	// wait for. Each close would thaw its own, but only after every
	// handover of this pass is told and stopped in turn.
	if s.deps.Pacer != nil {
		for _, k := range keys {
			ctx.Send(s.deps.Pacer, freeze.PaceFrozen{Key: k})
		}
	}
	told := make([]*actor.Future, len(keys))
	for i, k := range keys {
		told[i] = s.tellHandover(ctx, k, s.children[k])
	}
	for i, f := range told {
		if f == nil {
			continue
		}
		if _, err := f.Result(); err != nil {
			s.deps.Logger.Error("tell a handed-over partition its flipped HWM; it closes unchecked", "partition", keys[i], "err", err)
		}
	}
	stopped := make([]*actor.Future, len(keys))
	for i, k := range keys {
		stopped[i] = ctx.StopFuture(s.children[k])
	}
	for i, k := range keys {
		if err := stopped[i].Wait(); err != nil {
			s.deps.Logger.Error("stop partition", "partition", k, "err", err)
		}
		delete(s.byPID, s.children[k].Id)
		delete(s.children, k)
		s.deps.Running.remove(k)
		s.deps.Running.stopEnded(k)
		delete(s.linksSent, k)
		if t, ok := s.store.Topic(k.Topic); !ok || t.Incarnation != k.Incarnation {
			s.purge(k)
		}
	}
}

// tellHandover tells the actor of a partition that moved away from this
// node, by a flip that named the new owner's HWM, what that HWM is; nil
// when no flip by this node's hand took it (nothing to check).
func (s *Supervisor) tellHandover(ctx actor.Context, k messages.PartitionKey, pid *actor.PID) *actor.Future {
	a, ok := s.store.Assignment(k.Incarnation, k.Partition)
	if !ok || a.Owner == s.deps.NodeID || a.FlippedFrom != s.deps.NodeID {
		return nil
	}
	return ctx.RequestFuture(pid, handedOver{to: a.Owner, hwm: a.FlippedAtHWM}, s.deps.RequestTimeout)
}

// terminated handles a child that stopped. A child the supervisor gave up
// on is remembered so a reconcile does not respawn it in a loop.
func (s *Supervisor) terminated(ctx actor.Context, m *actor.Terminated) {
	if s.stopping {
		return // the node is shutting down: every child stops
	}
	k, ok := s.byPID[m.Who.Id]
	if pid := s.stoppingRest[k]; ok && pid != nil && pid.Equal(m.Who) {
		delete(s.byPID, m.Who.Id)
		delete(s.stoppingRest, k)
		s.restStopped(ctx, k)
		return
	}
	if !ok || !s.children[k].Equal(m.Who) {
		return // handed over: handOver forgot it when its stop was awaited
	}
	s.deps.Running.stopEnded(k) // closed its door to rest, then failed
	delete(s.byPID, m.Who.Id)
	delete(s.children, k)
	delete(s.linksSent, k)
	if s.woken[k] {
		delete(s.woken, k)
		s.deps.Running.close(k)
		if s.rest == nil {
			s.rest = map[messages.PartitionKey]atRest{}
		}
		s.rest[k] = atRest{sealed: true}
		s.deps.Logger.Warn("partition woken from rest could not open; at rest again, the next request tries once more", "partition", k)
		return
	}
	s.deps.Running.remove(k)
	s.failed[k] = true
	s.owned.Store(int64(s.ownedCount()))
	s.deps.Logger.Error("partition stopped after repeated failures; not serving it", "partition", k)
}

func (s *Supervisor) retain(ctx actor.Context) {
	// A resting partition is woken only when its oldest sealed segment is
	// past its topic's retention: a partition that rests holds none, or
	// one that is young, most of the time.
	now := clock.Or(s.deps.LogConfig.Clock).Now()
	probes := 0
	for k, r := range s.rest {
		t, ok := s.store.Topic(k.Topic)
		if !ok || t.RetentionMs <= 0 {
			continue
		}
		if r.cold {
			if probes == s.deps.Config.ColdProbesPerPassMax {
				continue // the next pass reads it
			}
			probes++
			r = s.probeCold(k)
			s.rest[k] = r
		}
		if r.sealed && now.Sub(r.oldest) > time.Duration(t.RetentionMs)*time.Millisecond {
			if err := s.wakeRest(ctx, k, true); err != nil {
				s.deps.Logger.Warn("wake a resting partition for retention", "partition", k, "err", err)
			}
		}
	}
	for k, pid := range s.children {
		if t, ok := s.store.Topic(k.Topic); ok && t.RetentionMs > 0 {
			ctx.Send(pid, &messages.Retain{MaxAge: time.Duration(t.RetentionMs) * time.Millisecond})
		}
	}
}

// startCold leaves k, which this node owns at its start, at rest with
// no actor ever started for it: a closed door without stats, so its first
// request wakes it as any resting partition's does, and nothing at rest
// retention must read (probeCold). It is what a partition that rested in
// the node's last life left on disk, and one that did not: its close, or
// a crash, left its log and consumer state as an open reads them anyway.
func (s *Supervisor) startCold(k messages.PartitionKey) {
	if _, running := s.children[k]; running || s.failed[k] {
		return
	}
	if s.rest == nil {
		s.rest = map[messages.PartitionKey]atRest{}
	}
	s.rest[k] = atRest{cold: true}
	s.deps.Running.close(k)
	if s.deps.Config.SurveyOpensMax > 0 {
		s.toSurvey = append(s.toSurvey, k)
	}
}

// survey opens the partitions started at rest, at most
// Config.SurveyOpensMax at a time, each to rest again at once (restCheck's
// survey): what an open learns that an operator or a consumer needs
// without asking each partition is then known. The topic gauges count its
// backlog and bytes, a record left to deliver is announced (Deps.Notify,
// as any open does), its stats and whether it is drained are left at its
// door, and its oldest segment is known to retention. A partition woken
// meanwhile by a request, or no longer owned here, is passed over. It
// runs after each pass and as each survey's open ends.
func (s *Supervisor) survey(ctx actor.Context) {
	if s.stopping || len(s.toSurvey) == 0 && len(s.surveying) == 0 {
		return
	}
	for k := range s.surveying {
		if _, open := s.children[k]; !open {
			delete(s.surveying, k) // failed, or handed over, before it opened
		}
	}
	for len(s.surveying) < s.deps.Config.SurveyOpensMax && len(s.toSurvey) > 0 {
		k := s.toSurvey[0]
		s.toSurvey = s.toSurvey[1:]
		if stats, _, resting := s.deps.Running.closedDoor(k); !resting || stats != nil {
			continue // open, or it opened and rested: its figures are known
		}
		if _, ok := s.rest[k]; !ok {
			continue // stopping to rest, or not owned here any more
		}
		if err := s.wakeRest(ctx, k, true); err != nil {
			s.deps.Logger.Warn("survey a partition at rest since the start", "partition", k, "err", err)
			continue
		}
		if s.surveying == nil {
			s.surveying = map[messages.PartitionKey]bool{}
		}
		s.surveying[k] = true
		ctx.Send(s.children[k], restCheck{survey: true})
	}
	if len(s.toSurvey) == 0 {
		s.toSurvey = nil // let the first pass's array go
	}
}

// probeCold reads the oldest sealed segment of k's log, which rests since
// the node started, from its directory; a read that fails leaves it
// unknown, and the retention pass wakes it to find out.
func (s *Supervisor) probeCold(k messages.PartitionKey) atRest {
	oldest, sealed, err := storage.OldestSealedIn(s.deps.LogConfig, storage.PartitionPath(s.deps.DataDir, k.Topic, k.Partition))
	if err != nil {
		s.deps.Logger.Warn("partition at rest since the start: oldest segment unknown", "partition", k, "err", err)
		return atRest{sealed: true}
	}
	return atRest{oldest: oldest, sealed: sealed}
}

// ownedCount is the partitions this node serves: with an actor or at rest.
func (s *Supervisor) ownedCount() int { return len(s.children) + len(s.rest) }

// rested stops a child that closed its door to rest and keeps what waking
// it for retention needs. A child a wake stopped and replaced meanwhile
// (another PID) is not this one's business.
func (s *Supervisor) rested(ctx actor.Context, m resting) {
	if pid, ok := s.children[m.key]; !ok || !pid.Equal(m.pid) {
		return
	}
	s.stopForRest(ctx, m.key)
	if s.rest == nil {
		s.rest = map[messages.PartitionKey]atRest{}
	}
	s.rest[m.key] = atRest{oldest: m.oldest, sealed: m.sealed}
}

// stopForRest stops k's child, whose door is closed, and forgets it as a
// child; the door stays, closed. The stop is not awaited: its end
// (Terminated) comes to restStopped, and a wake meanwhile waits for it.
func (s *Supervisor) stopForRest(ctx actor.Context, k messages.PartitionKey) {
	pid := s.children[k]
	ctx.Stop(pid)
	delete(s.children, k)
	delete(s.linksSent, k)
	if s.stoppingRest == nil {
		s.stoppingRest = map[messages.PartitionKey]*actor.PID{}
	}
	s.stoppingRest[k] = pid
	s.deps.Running.stopStarted(k)
}

// restStopped follows the end of an actor stopped to rest: the wakes that
// waited for it start the partition again and are answered; a partition
// forgotten meanwhile loses its data with its topic, and one owned again
// meanwhile (not at rest, no actor) is started by a pass.
func (s *Supervisor) restStopped(ctx actor.Context, k messages.PartitionKey) {
	s.deps.Running.stopEnded(k)
	for _, to := range s.dropWaiters[k] {
		ctx.Send(to, s.dropEarlierNow(ctx, k))
	}
	delete(s.dropWaiters, k)
	waiters := s.wakeWaiters[k]
	delete(s.wakeWaiters, k)
	_, atRest := s.rest[k]
	switch {
	case len(waiters) > 0:
		w := Woken{}
		if err := s.wakeRest(ctx, k, atRest); err != nil {
			w.Err = err.Error()
		}
		for _, to := range waiters {
			ctx.Send(to, w)
		}
	case atRest:
	case s.deps.Running.Has(k):
	default:
		if t, ok := s.store.Topic(k.Topic); !ok || t.Incarnation != k.Incarnation {
			s.purge(k)
			return
		}
		ctx.Send(ctx.Self(), Reconcile{})
	}
}

// forgetRest drops a resting partition this node no longer serves, and
// its data when its topic is gone.
func (s *Supervisor) forgetRest(k messages.PartitionKey) {
	delete(s.rest, k)
	delete(s.woken, k)
	s.deps.Running.remove(k)
	s.deps.Figures.close(k)
	if t, ok := s.store.Topic(k.Topic); !ok || t.Incarnation != k.Incarnation {
		s.purge(k)
	}
}

// wake answers Wake: the partition's door open, or why not; now is false
// when the answer waits for the end of the actor stopped to rest
// (restStopped). A child whose door closed and whose resting message has
// not come yet is stopped here and started again once it ended.
func (s *Supervisor) wake(ctx actor.Context, k messages.PartitionKey) (w Woken, now bool) {
	if s.stopping {
		return Woken{Err: "the node is stopping"}, true
	}
	if _, ok := s.children[k]; ok {
		if !s.deps.Running.resting(k) {
			return Woken{}, true // open already
		}
		s.stopForRest(ctx, k)
		// At rest until started again: a wake refused then leaves it for
		// the passes to forget, as any resting partition.
		if s.rest == nil {
			s.rest = map[messages.PartitionKey]atRest{}
		}
		s.rest[k] = atRest{sealed: true}
	}
	if _, ok := s.stoppingRest[k]; ok {
		if ctx.Sender() == nil {
			return Woken{}, false // told, not asked: its first request wakes it
		}
		if s.wakeWaiters == nil {
			s.wakeWaiters = map[messages.PartitionKey][]*actor.PID{}
		}
		s.wakeWaiters[k] = append(s.wakeWaiters[k], ctx.Sender())
		return Woken{}, false
	}
	_, resting := s.rest[k]
	if err := s.wakeRest(ctx, k, resting); err != nil {
		return Woken{Err: err.Error()}, true
	}
	return Woken{}, true
}

// wakeRest starts the actor of k, which this node owns: one that rests
// (resting) or has none yet.
func (s *Supervisor) wakeRest(ctx actor.Context, k messages.PartitionKey, resting bool) error {
	if s.failed[k] {
		return fmt.Errorf("partition %s/%d was given up on here", k.Topic, k.Partition)
	}
	if _, ok := s.stoppingRest[k]; ok {
		return fmt.Errorf("partition %s/%d is still stopping to rest", k.Topic, k.Partition)
	}
	a, ok := s.store.Assignment(k.Incarnation, k.Partition)
	topics := metastore.TopicKeys{Topics: s.store}
	if _, current := topics.Key(a); !ok || !current || a.Owner != s.deps.NodeID {
		return fmt.Errorf("partition %s/%d is not served by %s", k.Topic, k.Partition, s.deps.NodeID)
	}
	delete(s.rest, k)
	if resting {
		if s.woken == nil {
			s.woken = map[messages.PartitionKey]bool{}
		}
		s.woken[k] = true
	}
	// A resting partition held no freeze (it rests only without one):
	// it opens unfrozen whatever targets it. One never started opens as a
	// reconcile would start it.
	s.spawn(ctx, k, !resting && a.Target != "")
	if !s.deps.Running.Has(k) {
		return fmt.Errorf("partition %s/%d could not be started on %s", k.Topic, k.Partition, s.deps.NodeID)
	}
	s.owned.Store(int64(s.ownedCount()))
	return nil
}

// purge removes a deleted topic's partition data, and the topic directory
// once no partition is left in it.
//
// It runs under the topic's guard, and only while the topic directory's
// marker still names the deleted incarnation: a successor's move may have
// set that directory aside and installed its own partition at the same
// path meanwhile (rule V9); the copy set aside is the sweep's then.
func (s *Supervisor) purge(k messages.PartitionKey) {
	unlock := s.deps.Guards.Lock(k.Topic)
	defer unlock()
	ok, err := storage.MarkerNames(s.deps.DataDir, k.Topic, k.Incarnation, false)
	switch {
	case err != nil:
		s.deps.Logger.Error("purge deleted partition: read the topic directory's marker", "partition", k, "err", err)
		return
	case !ok || s.deps.Guards.PartitionOpen(k.Topic, k.Partition):
		return
	}
	if err := storage.PurgePartition(s.deps.DataDir, k.Topic, k.Partition); err != nil {
		s.deps.Logger.Error("purge deleted partition", "partition", k, "err", err)
	}
}
