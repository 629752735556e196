package metastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/client"
	"github.com/lni/dragonboat/v4/config"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/lni/vfs"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
)

// maxAssignmentsPerEntry splits a PutAssignments into several entries of one
// shard beyond this many assignments (about 100 bytes each), so a topic of
// 300,000 partitions never makes a multi-megabyte Raft entry. A put is
// idempotent, so a split put that fails half-way is simply retried.
const maxAssignmentsPerEntry = 4096

// maxFlipsPerEntry bounds one Flips entry (its result carries each flip's
// assignment, about 150 bytes): 1,024 keep an entry and its result near
// 150 KiB, and 10,000 flips over 4 shards still take only 12 entries.
const maxFlipsPerEntry = 1024

// maxTargetsPerEntry bounds one SetTargets entry the same way: a planning
// round of MaxInFlightMoves (512) picks fits one entry per shard.
const maxTargetsPerEntry = 1024

// maxRecreatesPerEntry bounds one Recreates entry the same way: a lost
// member's 10,000 partitions over 4 shards take about 12 entries.
const maxRecreatesPerEntry = 1024

// Store is one node's replica of the metastore: a Dragonboat NodeHost with
// the metadata shard and the K assignment shards. Its methods are safe for
// concurrent use.
type Store struct {
	cfg   Config
	clock clock.Clock // cfg.Clock or the wall
	log   *slog.Logger
	nh    *dragonboat.NodeHost
	// clusterVersion mirrors the metadata state's, for ClusterVersion.
	clusterVersion atomic.Int64
	// meta is shard MetaShard; assign[i] is shard firstAssignmentShard+i.
	meta   *fsm[*metaState]
	assign []*fsm[*assignState]
	// sessions holds one NO-OP session per shard (safe for concurrent use;
	// the state machines are idempotent where it matters, so no
	// exactly-once client sessions).
	sessions  map[uint64]*client.Session
	changes   notifier
	removal   *removal
	metrics   *storeMetrics
	closeOnce sync.Once
}

// Open starts this node's NodeHost and its replica of every shard. It does
// not wait for elections: call WaitReady. Each shard starts in one of three
// ways (startMode):
//
//   - restart: the NodeHost directory already holds this replica of the
//     shard (Dragonboat's bootstrap record, NodeHost.HasNodeInfo): it starts
//     with no member map and join=false, and Dragonboat recovers its
//     membership, snapshot and log. This applies to initial and joined
//     members alike; reopen a Dir with the same RaftAddr.
//   - join (cfg.Join, first start): no member map and join=true. A
//     running member adds the replica (Store.AddNonVoter on every shard),
//     before or after this Open; until then it waits to be contacted and
//     WaitReady does not return. Opening first avoids the peers' dial
//     back-off to an address nobody listens on yet.
//   - bootstrap (first start of an initial member): cfg.InitialMembers and
//     join=false.
//
// With cfg.Join every replica starts as a non-voter (config.IsNonVoting),
// on the first start and on every restart: Dragonboat panics when a voter
// replica is told it is a non-voter, while a non-voter that the recovered
// snapshot or log shows promoted becomes a voter by itself.
func Open(cfg Config, log *slog.Logger) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	installLogger(log)
	removed := newRemoval(cfg.ReplicaID)
	logdb := config.GetTinyMemLogDBConfig()
	logdb.KVWriteBufferSize = cfg.LogDBWriteBufferBytes
	logdb.Shards = cfg.LogDBShards
	if !cfg.InMemory {
		if made, err := logDBShardsIn(cfg.Dir); err != nil {
			return nil, err
		} else if made > 0 {
			logdb.Shards = made
		}
	}
	nhc := config.NodeHostConfig{
		NodeHostDir:    cfg.Dir,
		RTTMillisecond: cfg.RTTMillisecond,
		RaftAddress:    cfg.RaftAddr,
		// The default LogDB config reserves gigabytes of memtables; the
		// metastore's write rate needs a few megabytes.
		Expert:              config.ExpertConfig{LogDB: logdb},
		SystemEventListener: removed,
		MutualTLS:           cfg.MutualTLS(),
		CAFile:              cfg.TLSCAFile,
		CertFile:            cfg.TLSCertFile,
		KeyFile:             cfg.TLSKeyFile,
	}
	if cfg.InMemory {
		nhc.Expert.FS = vfs.NewMem()
	}
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("metastore: start nodehost %s at %s in %s: %w", cfg.NodeID, cfg.RaftAddr, cfg.Dir, err)
	}
	shards := shardIDs(cfg.AssignmentShards)
	s := &Store{
		cfg:      cfg,
		clock:    clock.Or(cfg.Clock),
		log:      log.With("component", "metastore", "node", cfg.NodeID),
		nh:       nh,
		sessions: make(map[uint64]*client.Session, len(shards)),
		metrics:  newStoreMetrics(cfg.Metrics, cfg.NodeID, shards),
		removal:  removed,
	}
	s.meta = newFSM(MetaShard, newMetaState(), loadMetaState, s.applied)
	for _, shard := range shards[1:] {
		s.assign = append(s.assign, newFSM(shard, newAssignState(), loadAssignState, s.applied))
	}
	starts := make(map[string]int, 3)
	for _, shard := range shards {
		var machine sm.IStateMachine = s.meta
		if shard != MetaShard {
			machine = s.assign[shard-firstAssignmentShard]
		}
		mode := startMode(cfg, nh.HasNodeInfo(shard, cfg.ReplicaID))
		starts[mode.name]++
		rc := config.Config{
			ShardID:            shard,
			ReplicaID:          cfg.ReplicaID,
			IsNonVoting:        cfg.Join,
			ElectionRTT:        cfg.ElectionRTT,
			HeartbeatRTT:       cfg.HeartbeatRTT,
			SnapshotEntries:    cfg.SnapshotEntries,
			CompactionOverhead: cfg.CompactionOverhead,
			// A leader that loses its quorum steps down, and a replica that
			// was cut off does not disrupt the group when it returns.
			CheckQuorum: true,
			PreVote:     true,
		}
		create := func(uint64, uint64) sm.IStateMachine { return machine }
		if err := nh.StartReplica(mode.members, mode.join, create, rc); err != nil {
			nh.Close()
			return nil, fmt.Errorf("metastore: start shard %d replica %d (%s): %w", shard, cfg.ReplicaID, mode.name, err)
		}
		s.sessions[shard] = nh.GetNoOPSession(shard)
	}
	s.log.Info("metastore opened", "replica", cfg.ReplicaID, "raft_addr", cfg.RaftAddr,
		"assignment_shards", cfg.AssignmentShards, "members", len(cfg.InitialMembers),
		"join", cfg.Join, "restarted", starts["restart"], "joined", starts["join"], "bootstrapped", starts["bootstrap"])
	return s, nil
}

// logDBShardsIn counts the LogDB instances a Raft directory was made with
// (Dragonboat's <dir>/<host>/<deployment>/logdb-<i>); 0 when it holds none.
func logDBShardsIn(dir string) (uint64, error) {
	made, err := filepath.Glob(filepath.Join(dir, "*", "*", "logdb-*"))
	if err != nil {
		return 0, fmt.Errorf("metastore: list the LogDB of %s: %w", dir, err)
	}
	return uint64(len(made)), nil
}

// shardStart is how Open starts one shard's replica.
type shardStart struct {
	name    string // "restart", "join" or "bootstrap"
	members map[uint64]dragonboat.Target
	join    bool
}

// startMode decides how to start a shard's replica: restart when the
// NodeHost already holds it (hasNodeInfo), else join or bootstrap (see
// Open).
func startMode(cfg Config, hasNodeInfo bool) shardStart {
	switch {
	case hasNodeInfo:
		return shardStart{name: "restart"}
	case cfg.Join:
		return shardStart{name: "join", join: true}
	default:
		members := make(map[uint64]dragonboat.Target, len(cfg.InitialMembers))
		for id, addr := range cfg.InitialMembers {
			members[id] = addr
		}
		return shardStart{name: "bootstrap", members: members}
	}
}

// applied is every state machine's onApply: metrics, the cluster version
// and the change feed.
func (s *Store) applied(shard, index uint64) {
	s.metrics.setApplied(shard, index)
	if shard == MetaShard {
		s.meta.view(func(st *metaState) { s.clusterVersion.Store(int64(st.clusterVersion)) })
	}
	s.changes.notify()
}

// ClusterVersion is the cluster version this replica has applied (see
// messages.ClusterVersionBase): ClusterVersionBase while unset. It is an
// atomic read, cheap enough for every batch a log writes.
func (s *Store) ClusterVersion() int {
	return max(int(s.clusterVersion.Load()), messages.ClusterVersionBase)
}

// WaitReady returns once every shard has a leader and a linearizable read
// succeeded on this replica, so the replica has applied everything
// committed before the call. Until then local reads may be stale or empty.
func (s *Store) WaitReady(ctx context.Context) error {
	// The shards catch up at once: each waits for its own leader's first
	// heartbeat after a restart, so one after the other would add their
	// waits up.
	shards := shardIDs(s.cfg.AssignmentShards)
	errs := make(chan error, len(shards))
	for _, shard := range shards {
		go func() { errs <- s.waitShardReady(ctx, shard) }()
	}
	var err error
	for range shards {
		err = errors.Join(err, <-errs)
	}
	return err
}

// Applied reads every shard's applied index linearizably (in Shards()
// order): each is at least what that shard had committed when the call
// began. A peer's answer lets a replica that just restarted tell it has
// caught up without a read of its own (WaitApplied).
func (s *Store) Applied(ctx context.Context) ([]uint64, error) {
	shards := s.Shards()
	out := make([]uint64, len(shards))
	errs := make(chan error, len(shards))
	for i, shard := range shards {
		go func() {
			var err error
			out[i], err = s.appliedRead(ctx, shard)
			errs <- err
		}()
	}
	var err error
	for range shards {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return nil, fmt.Errorf("metastore: applied indexes: %w", err)
	}
	return out, nil
}

// appliedRead is one shard's applied index, read linearizably.
func (s *Store) appliedRead(ctx context.Context, shard uint64) (uint64, error) {
	v, err := s.read(ctx, shard, appliedQuery{})
	if err != nil {
		return 0, fmt.Errorf("shard %d: %w", shard, err)
	}
	return v.(uint64), nil
}

// WaitApplied returns once this replica has applied at least want[i] on
// shard Shards()[i], every shard. With want from a peer's Applied, that
// makes this replica as current as a linearizable read begun when the peer
// began its reads would: WaitReady's guarantee, reached without a leader
// having answered this replica. A replica that never gets there (removed,
// or cut off) waits until ctx ends.
func (s *Store) WaitApplied(ctx context.Context, want []uint64) error {
	fsms := s.fsmApplied()
	if len(want) != len(fsms) {
		return fmt.Errorf("metastore: wait applied: %d indexes for %d shards: %w", len(want), len(fsms), ErrInvalid)
	}
	for {
		behind := false
		for i, applied := range fsms {
			if applied() < want[i] {
				behind = true
				break
			}
		}
		if !behind {
			return nil
		}
		if err := s.waitTick(ctx, s.tick()); err != nil {
			return fmt.Errorf("metastore: wait applied: %w: %w", ErrUnavailable, err)
		}
	}
}

// fsmApplied is each shard's local applied index, in Shards() order.
func (s *Store) fsmApplied() []func() uint64 {
	out := []func() uint64{s.meta.applied.Load}
	for _, f := range s.assign {
		out = append(out, f.applied.Load)
	}
	return out
}

// waitShardReady is WaitReady for one shard. Whether a leader is known is
// a local lookup, so it is asked every tick: a longer back-off only delays
// the ready read past the leader's first heartbeat.
func (s *Store) waitShardReady(ctx context.Context, shard uint64) error {
	b := s.newBackoff()
	for {
		_, _, known, err := s.nh.GetLeaderID(shard)
		wait := b.wait
		switch {
		case err != nil:
		case !known:
			err, wait = errors.New("no leader known"), s.waitTick
		default:
			if err = s.readyRead(ctx, shard); err == nil {
				return nil
			}
		}
		if werr := wait(ctx, s.tick()); werr != nil {
			return fmt.Errorf("metastore: wait ready: shard %d: %w: %w (last: %v)", shard, ErrUnavailable, werr, err)
		}
	}
}

// waitTick waits one tick, or until ctx ends.
func (s *Store) waitTick(ctx context.Context, tick time.Duration) error {
	return clock.Sleep(ctx, s.clock, tick)
}

// readyRead is WaitReady's linearizable read of one shard, bounded by an
// election timeout rather than ProposalTimeout: a replica that just
// restarted may send its first ReadIndex to a leader it has not heard
// from yet, and Dragonboat drops such a read without an answer, so the
// read would otherwise hold a restart for the whole ProposalTimeout.
func (s *Store) readyRead(ctx context.Context, shard uint64) error {
	rctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.ElectionRTT)*s.tick())
	defer cancel()
	_, err := s.read(rctx, shard, appliedQuery{})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("ready read of shard %d: %w", shard, err)
	}
	return err
}

// CatchUp returns once this replica has applied, on every shard, what was
// committed before the call (a ReadIndex barrier per shard), so that local
// reads after it reflect a change another replica just made.
//
// Each read is tried for an election timeout at a time, until ctx ends: a
// ReadIndex that reached a leader as it lost its leadership is dropped
// unanswered, and waiting out ProposalTimeout for it would hold every
// caller (the controller's planning pass among them) for seconds.
func (s *Store) CatchUp(ctx context.Context) error {
	for _, shard := range s.Shards() {
		b := s.newBackoff()
		for {
			err := s.readyRead(ctx, shard)
			if err == nil {
				break
			}
			if ctx.Err() != nil || !errors.Is(err, ErrUnavailable) || b.wait(ctx, s.tick()) != nil {
				return fmt.Errorf("metastore: catch up shard %d: %w", shard, err)
			}
		}
	}
	return nil
}

// Close stops the NodeHost and every replica. Reads after Close answer from
// the last applied state; proposals fail with ErrUnavailable.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.nh.Close()
		s.log.Info("metastore closed")
	})
}

// Leader returns the replica id this replica believes leads shard.
func (s *Store) Leader(shard uint64) (replicaID uint64, ok bool) {
	id, _, ok, err := s.nh.GetLeaderID(shard)
	return id, ok && err == nil
}

// ReplicaID is this node's Raft replica id.
func (s *Store) ReplicaID() uint64 { return s.cfg.ReplicaID }

// Shards returns every shard id, the metadata shard first.
func (s *Store) Shards() []uint64 { return shardIDs(s.cfg.AssignmentShards) }

// ---- topics (metadata shard) ----

// CreateTopic creates t; the returned topic carries its Incarnation (the
// Raft index of the create). ErrExists if the name is taken: the existing
// topic is returned with it, so a retry after ErrUnavailable can tell its
// own create (same CreatedAt) from another's.
func (s *Store) CreateTopic(ctx context.Context, t messages.Topic) (messages.Topic, error) {
	if t.Name == "" || t.Partitions < 1 {
		return messages.Topic{}, fmt.Errorf("metastore: create topic %q with %d partitions: %w", t.Name, t.Partitions, ErrInvalid)
	}
	r, err := s.proposeMeta(ctx, "create topic "+t.Name, messages.MetaCommand{CreateTopic: &messages.CreateTopic{Topic: t}})
	if err != nil {
		return messages.Topic{}, err
	}
	if r.Code == messages.ResultExists && r.Topic != nil {
		return *r.Topic, codeError("create topic "+t.Name, r.Code)
	}
	return topicOf(r, "create topic "+t.Name)
}

// DeleteTopic deletes the topic named name, whatever its incarnation, and
// returns the deleted record (ErrNotFound if there is none). Its
// assignments stay until DeleteAssignments(incarnation, partitions).
func (s *Store) DeleteTopic(ctx context.Context, name string) (messages.Topic, error) {
	r, err := s.proposeMeta(ctx, "delete topic "+name, messages.MetaCommand{DeleteTopic: &messages.DeleteTopic{Name: name}})
	if err != nil {
		return messages.Topic{}, err
	}
	return topicOf(r, "delete topic "+name)
}

// AlterTopic changes the settings of a topic and returns the new record:
// ErrNotFound, or ErrInvalid when Partitions would not grow.
func (s *Store) AlterTopic(ctx context.Context, a messages.AlterTopic) (messages.Topic, error) {
	r, err := s.proposeMeta(ctx, "alter topic "+a.Name, messages.MetaCommand{AlterTopic: &a})
	if err != nil {
		return messages.Topic{}, err
	}
	return topicOf(r, "alter topic "+a.Name)
}

// AttachChild links child to parent as a fan-out child delayed delayMs
// and returns the parent after; a refusal is a *RefusedError.
func (s *Store) AttachChild(ctx context.Context, parent, child string, delayMs int64) (messages.Topic, error) {
	op := "attach " + child + " to " + parent
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{AttachChild: &messages.AttachChild{Parent: parent, Child: child, DelayMs: delayMs}})
	if err != nil {
		return messages.Topic{}, err
	}
	return topicOf(r, op)
}

// DetachChild removes the link from parent to child and returns the
// parent after; a refusal is a *RefusedError.
func (s *Store) DetachChild(ctx context.Context, parent, child string) (messages.Topic, error) {
	op := "detach " + child + " from " + parent
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{DetachChild: &messages.DetachChild{Parent: parent, Child: child}})
	if err != nil {
		return messages.Topic{}, err
	}
	return topicOf(r, op)
}

func (s *Store) proposeMeta(ctx context.Context, op string, cmd messages.MetaCommand) (messages.MetaResult, error) {
	cmd.Version = commandVersion(cmd)
	var r messages.MetaResult
	err := s.propose(ctx, op, MetaShard, cmd, &r)
	return r, err
}

// commandVersion is the oldest version that knows cmd: a replica of an
// older binary keeps applying what it knows (see messages.CommandVersion).
func commandVersion(cmd messages.MetaCommand) int {
	if cmd.ForgetMember != nil {
		return messages.LostDiskCommandVersion
	}
	if cmd.SetClusterVersion != nil {
		return messages.ClusterVersionCommandVersion
	}
	if cmd.AttachChild != nil || cmd.DetachChild != nil || (cmd.CreateTopic != nil && cmd.CreateTopic.Topic.Parent != "") {
		return messages.FanoutCommandVersion
	}
	return 1
}

// assignCommandVersion is the oldest version that knows cmd, as
// commandVersion is for the metadata shard: SetTargets needs 3, and every
// other assignment command keeps the 2 it was stamped before 3 existed.
func assignCommandVersion(cmd messages.AssignCommand) int {
	if cmd.Recreates != nil {
		return messages.LostDiskCommandVersion
	}
	if cmd.SetTargets != nil {
		return messages.TargetsCommandVersion
	}
	return messages.FanoutCommandVersion
}

// topicOf is recordOf for a topic command, whose refusals may carry a
// Reason the caller shows (a RefusedError).
func topicOf(r messages.MetaResult, op string) (messages.Topic, error) {
	if r.Code != messages.ResultOK && r.Reason != "" {
		return messages.Topic{}, &RefusedError{Op: op, Reason: r.Reason, kind: errors.Unwrap(codeError(op, r.Code))}
	}
	return recordOf(r, op, "topic", r.Topic)
}

// Topic reads a topic from this replica (possibly stale: for routing).
func (s *Store) Topic(name string) (messages.Topic, bool) {
	return metaLookup(s, name, (*metaState).topic)
}

// metaLookup reads one record of this replica's metadata by its key, under
// the state's read lock (possibly stale: routing and authentication read
// this way on every request).
func metaLookup[K, V any](s *Store, key K, get func(*metaState, K) (V, bool)) (v V, ok bool) {
	s.meta.view(func(st *metaState) { v, ok = get(st, key) })
	return v, ok
}

// metaList reads one sorted list of this replica's metadata.
func metaList[V any](s *Store, list func(*metaState) []V) (vs []V) {
	s.meta.view(func(st *metaState) { vs = list(st) })
	return vs
}

// recordOf is the record a command's result carries when it answered OK;
// what names the record in the error of a result without one.
func recordOf[T any](r messages.MetaResult, op, what string, rec *T) (T, error) {
	var zero T
	if r.Code != messages.ResultOK {
		return zero, codeError(op, r.Code)
	}
	if rec == nil {
		return zero, fmt.Errorf("metastore: %s: result has no %s", op, what)
	}
	return *rec, nil
}

// CurrentParent is whether the topic created as incarnation is current in
// this replica (not deleted, not recreated since) and its fan-out parent,
// from an index by incarnation: what a planning round checks of each
// partition it may move, without a look-up by name or a copy of the
// record.
func (s *Store) CurrentParent(incarnation uint64) (parent string, current bool) {
	s.meta.view(func(st *metaState) { parent, current = st.parents[incarnation] })
	return parent, current
}

// Topics lists the topics of this replica, sorted by name.
func (s *Store) Topics() []messages.Topic {
	return metaList(s, (*metaState).list)
}

// LeaderTopic reads a topic linearizably (a ReadIndex barrier through the
// leader): it reflects every create, alter and delete that completed
// before the call.
func (s *Store) LeaderTopic(ctx context.Context, name string) (messages.Topic, bool, error) {
	v, err := s.read(ctx, MetaShard, topicQuery{name: name})
	if err != nil {
		return messages.Topic{}, false, fmt.Errorf("metastore: leader read of topic %q: %w", name, err)
	}
	a := v.(topicAnswer)
	return a.topic, a.found, nil
}

// ---- assignments (assignment shards) ----

// PutAssignments creates the assignments that do not exist yet; existing
// ones are left as they are. One proposal per shard (more beyond
// maxAssignmentsPerEntry), in parallel. ErrInvalid, before anything is
// proposed, if an assignment lacks a topic, an incarnation or an owner, or
// targets its owner. It is idempotent: retry after an error.
func (s *Store) PutAssignments(ctx context.Context, as []messages.Assignment) error {
	byShard := make(map[uint64][]messages.Assignment)
	for _, a := range as {
		if !validAssignment(a) {
			return fmt.Errorf("metastore: put assignment %s/%d (incarnation %d) owner %q target %q: %w",
				a.Topic, a.Partition, a.Incarnation, a.Owner, a.Target, ErrInvalid)
		}
		shard := AssignmentShard(a.Incarnation, a.Partition, s.cfg.AssignmentShards)
		byShard[shard] = append(byShard[shard], a)
	}
	var cmds []shardCommand
	for _, shard := range slices.Sorted(maps.Keys(byShard)) {
		for chunk := range slices.Chunk(byShard[shard], maxAssignmentsPerEntry) {
			cmds = append(cmds, shardCommand{shard, messages.AssignCommand{PutAssignments: &messages.PutAssignments{Assignments: chunk}}})
		}
	}
	return s.proposeAll(ctx, "put assignments", cmds)
}

// DeleteAssignments removes every assignment of a topic incarnation: one
// proposal to each shard that can hold one of its partitions 0 ..
// partitions-1 (every shard when partitions < 1). Idempotent.
func (s *Store) DeleteAssignments(ctx context.Context, incarnation uint64, partitions int) error {
	k := s.cfg.AssignmentShards
	shards := make(map[uint64]bool, k)
	if partitions < 1 {
		for _, shard := range shardIDs(k)[1:] {
			shards[shard] = true
		}
	}
	for p := 0; p < partitions && len(shards) < k; p++ {
		shards[AssignmentShard(incarnation, p, k)] = true
	}
	var cmds []shardCommand
	for _, shard := range slices.Sorted(maps.Keys(shards)) {
		cmds = append(cmds, shardCommand{shard, messages.AssignCommand{DeleteAssignments: &messages.DeleteAssignments{Incarnation: incarnation}}})
	}
	return s.proposeAll(ctx, fmt.Sprintf("delete assignments of incarnation %d", incarnation), cmds)
}

type shardCommand struct {
	shard uint64
	cmd   messages.AssignCommand
}

// proposeAll proposes every command in parallel and expects ResultOK from
// each; the error joins every failure.
func (s *Store) proposeAll(ctx context.Context, op string, cmds []shardCommand) error {
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Go(func() {
			r, err := s.proposeAssign(ctx, op, c.shard, c.cmd)
			if err == nil && r.Code != messages.ResultOK {
				err = codeError(fmt.Sprintf("%s on shard %d", op, c.shard), r.Code)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// SetTarget is the controller's compare-and-swap on Target (see
// messages.SetTarget). A refused CAS is a result (ResultRefused, or
// ResultNotFound when the partition has no assignment) carrying the
// current assignment; an error means the outcome is unknown, except
// ErrInvalid (an owner-less command or To == Owner), which was not
// proposed.
func (s *Store) SetTarget(ctx context.Context, c messages.SetTarget) (messages.AssignResult, error) {
	if c.Owner == "" || c.To == c.Owner {
		return messages.AssignResult{}, fmt.Errorf("metastore: set target of %d/%d owner %q to %q: %w", c.Incarnation, c.Partition, c.Owner, c.To, ErrInvalid)
	}
	shard := AssignmentShard(c.Incarnation, c.Partition, s.cfg.AssignmentShards)
	return s.proposeAssign(ctx, fmt.Sprintf("set target of %d/%d", c.Incarnation, c.Partition), shard, messages.AssignCommand{SetTarget: &c})
}

// Flip is the ownership compare-and-swap of a move (rules O3, O4): Owner :=
// To if Owner is still From and Target is still To; a flip already applied
// answers ResultOK. A refused flip is a result, not an error; an error
// means the outcome is unknown (resolve it with LeaderAssignment), except
// ErrInvalid (empty or equal From and To), which was not proposed.
func (s *Store) Flip(ctx context.Context, c messages.Flip) (messages.AssignResult, error) {
	if c.From == "" || c.To == "" || c.From == c.To {
		return messages.AssignResult{}, fmt.Errorf("metastore: flip %d/%d from %q to %q: %w", c.Incarnation, c.Partition, c.From, c.To, ErrInvalid)
	}
	shard := AssignmentShard(c.Incarnation, c.Partition, s.cfg.AssignmentShards)
	return s.proposeAssign(ctx, fmt.Sprintf("flip %d/%d", c.Incarnation, c.Partition), shard, messages.AssignCommand{Flip: &c})
}

// FlipOutcome is one flip's outcome in FlipMany: Err nil means Result is
// the state machine's answer (ResultOK, ResultRefused, ResultNotFound);
// Err non-nil means the outcome is unknown (resolve it with
// LeaderAssignment), or ErrInvalid for a flip that was not proposed.
type FlipOutcome struct {
	Result messages.AssignResult
	Err    error
}

// FlipMany proposes many flips (see Flip) at once: grouped by assignment
// shard into entries of up to maxFlipsPerEntry, all proposed in parallel,
// so a bulk move pays a Raft round trip per entry, not per partition. The
// outcomes are in the order of flips; each flip is a compare-and-swap of
// its own, and a retried flip that already applied answers ResultOK, so
// the flips with an unknown outcome may simply be sent again.
func (s *Store) FlipMany(ctx context.Context, flips []messages.Flip) []FlipOutcome {
	return proposeMany(ctx, s, flips, maxFlipsPerEntry, "flip",
		func(c messages.Flip) (uint64, int, error) {
			if c.From == "" || c.To == "" || c.From == c.To {
				return 0, 0, fmt.Errorf("metastore: flip %d/%d from %q to %q: %w", c.Incarnation, c.Partition, c.From, c.To, ErrInvalid)
			}
			return c.Incarnation, c.Partition, nil
		},
		func(batch []messages.Flip) messages.AssignCommand {
			return messages.AssignCommand{Flips: &messages.Flips{Flips: batch}}
		},
		func(r messages.AssignResult) []messages.AssignResult { return r.Flips })
}

// TargetOutcome is one target's outcome in SetTargetMany, read as a
// FlipOutcome is.
type TargetOutcome = FlipOutcome

// SetTargetMany proposes many target compare-and-swaps (see SetTarget) at
// once, grouped by assignment shard into entries of up to
// maxTargetsPerEntry, all proposed in parallel: a planning round costs a
// Raft round trip per shard, not per pick. The outcomes are in the order
// of targets; each is judged on its own.
func (s *Store) SetTargetMany(ctx context.Context, targets []messages.SetTarget) []TargetOutcome {
	return proposeMany(ctx, s, targets, maxTargetsPerEntry, "set targets of",
		func(c messages.SetTarget) (uint64, int, error) {
			if c.Owner == "" || c.To == c.Owner {
				return 0, 0, fmt.Errorf("metastore: set target of %d/%d owner %q to %q: %w", c.Incarnation, c.Partition, c.Owner, c.To, ErrInvalid)
			}
			return c.Incarnation, c.Partition, nil
		},
		func(batch []messages.SetTarget) messages.AssignCommand {
			return messages.AssignCommand{SetTargets: &messages.SetTargets{Targets: batch}}
		},
		func(r messages.AssignResult) []messages.AssignResult { return r.Targets })
}

// RecreateOutcome is one re-creation's outcome in RecreateMany, read as
// a FlipOutcome is.
type RecreateOutcome = FlipOutcome

// RecreateMany gives partitions of a lost member to live nodes, empty
// (see messages.Recreate), grouped by assignment shard into entries of up
// to maxRecreatesPerEntry, all proposed in parallel. Each is a
// compare-and-swap on the owner, so one with an unknown outcome may be
// sent again.
func (s *Store) RecreateMany(ctx context.Context, items []messages.Recreate) []RecreateOutcome {
	return proposeMany(ctx, s, items, maxRecreatesPerEntry, "re-create",
		func(c messages.Recreate) (uint64, int, error) {
			if c.From == "" || c.To == "" || c.From == c.To {
				return 0, 0, fmt.Errorf("metastore: re-create %d/%d from %q on %q: %w", c.Incarnation, c.Partition, c.From, c.To, ErrInvalid)
			}
			return c.Incarnation, c.Partition, nil
		},
		func(batch []messages.Recreate) messages.AssignCommand {
			return messages.AssignCommand{Recreates: &messages.Recreates{Recreates: batch}}
		},
		func(r messages.AssignResult) []messages.AssignResult { return r.Recreates })
}

// proposeMany is FlipMany and SetTargetMany: check each item (key names
// its partition, or refuses it unproposed), group the rest by assignment
// shard into entries of at most perEntry, propose the entries in
// parallel, and hand each item its own result (results picks them out of
// an entry's answer) or its entry's error.
func proposeMany[T any](ctx context.Context, s *Store, items []T, perEntry int, verb string,
	key func(T) (uint64, int, error), command func([]T) messages.AssignCommand,
	results func(messages.AssignResult) []messages.AssignResult) []FlipOutcome {
	out := make([]FlipOutcome, len(items))
	byShard := make(map[uint64][]int)
	for i, it := range items {
		inc, part, err := key(it)
		if err != nil {
			out[i].Err = err
			continue
		}
		shard := AssignmentShard(inc, part, s.cfg.AssignmentShards)
		byShard[shard] = append(byShard[shard], i)
	}
	var wg sync.WaitGroup
	for shard, idx := range byShard {
		for chunk := range slices.Chunk(idx, perEntry) {
			wg.Go(func() {
				batch := make([]T, len(chunk))
				for k, i := range chunk {
					batch[k] = items[i]
				}
				op := fmt.Sprintf("%s %d partitions", verb, len(batch))
				r, err := s.proposeAssign(ctx, op, shard, command(batch))
				got := results(r)
				if err == nil && (r.Code != messages.ResultOK || len(got) != len(batch)) {
					err = fmt.Errorf("metastore: %s on shard %d: got code %d with %d results: %w", op, shard, r.Code, len(got), ErrInvalid)
				}
				for k, i := range chunk {
					if err != nil {
						out[i].Err = err
					} else {
						out[i].Result = got[k]
					}
				}
			})
		}
	}
	wg.Wait()
	return out
}

func (s *Store) proposeAssign(ctx context.Context, op string, shard uint64, cmd messages.AssignCommand) (messages.AssignResult, error) {
	cmd.Version = assignCommandVersion(cmd)
	var r messages.AssignResult
	err := s.propose(ctx, op, shard, cmd, &r)
	return r, err
}

// Assignment is one partition's assignment in this replica: a point
// lookup in its shard, for routing on every produce, commit and consume
// (Assignments collects and sorts a whole topic).
func (s *Store) Assignment(incarnation uint64, partition int) (messages.Assignment, bool) {
	shard := AssignmentShard(incarnation, partition, s.cfg.AssignmentShards)
	var a messages.Assignment
	var ok bool
	s.assign[shard-firstAssignmentShard].view(func(st *assignState) { a, ok = st.get(incarnation, partition) })
	return a, ok
}

// Assignments lists, from this replica, the existing assignments of
// partitions 0 .. partitions-1 of a topic incarnation (every partition when
// partitions < 1), by partition.
func (s *Store) Assignments(incarnation uint64, partitions int) []messages.Assignment {
	var out []messages.Assignment
	for _, f := range s.assign {
		f.view(func(st *assignState) {
			for p, a := range st.byInc[incarnation] {
				if partitions < 1 || p < partitions {
					out = append(out, a)
				}
			}
		})
	}
	sortAssignments(out)
	return out
}

// OwnedBy lists, from this replica, every assignment whose Owner is node,
// across shards, sorted by (incarnation, partition).
func (s *Store) OwnedBy(node string) []messages.Assignment {
	return s.collect(func(st *assignState) []messages.Assignment { return gather(st, st.owned[node]) })
}

// TargetedAt lists, from this replica, every assignment whose Target is
// node (the moves this node should run), sorted by (incarnation,
// partition).
func (s *Store) TargetedAt(node string) []messages.Assignment {
	return s.collect(func(st *assignState) []messages.Assignment { return gather(st, st.targeted[node]) })
}

// Moving lists, from this replica, every assignment with a target: the
// moves planned or in flight, by incarnation and partition.
func (s *Store) Moving() []messages.Assignment {
	return s.collect((*assignState).moving)
}

// collect merges fn's answer from every shard, sorted.
func (s *Store) collect(fn func(*assignState) []messages.Assignment) []messages.Assignment {
	var out []messages.Assignment
	for _, f := range s.assign {
		f.view(func(st *assignState) { out = append(out, fn(st)...) })
	}
	sortAssignments(out)
	return out
}

// AppendOwnedBy appends to buf every assignment node owns, as OwnedBy
// but in no particular order and into a buffer the caller keeps, for a
// caller that only builds a set of them (the partitions supervisor, at
// every change): sorting 10,000 assignments at each pass was most of its
// cost, and a fresh slice of them each pass was most of the garbage a bulk
// move's destination made (issue 27's profile).
func (s *Store) AppendOwnedBy(node string, buf []messages.Assignment) []messages.Assignment {
	for _, f := range s.assign {
		f.view(func(st *assignState) {
			for k := range st.owned[node] {
				a, _ := st.get(k.incarnation, k.partition)
				buf = append(buf, a)
			}
		})
	}
	return buf
}

// OwnerCursor marks how far a reader followed this replica's owner
// changes (OwnerChangesSince). The zero value marks nothing: its first
// OwnerChangesSince reports false.
type OwnerCursor struct {
	restores []int64
	seqs     []uint64
}

// MarkOwners sets c to this replica's owner changes as of now. A reader
// marks before it reads the assignments whole, so that a change during
// the read comes again with the next OwnerChangesSince rather than never.
func (s *Store) MarkOwners(c *OwnerCursor) {
	c.restores, c.seqs = c.restores[:0], c.seqs[:0]
	for _, f := range s.assign {
		f.view(func(st *assignState) {
			c.restores = append(c.restores, f.restores.Load())
			c.seqs = append(c.seqs, st.owners.seq)
		})
	}
}

// OwnerChangesSince appends to buf the current assignment of every
// partition whose owner changed since c (created, flipped or deleted; a
// deleted one comes with only Incarnation and Partition set), oldest first
// per shard, a partition once per change, and moves c on. It reports false,
// leaving c as it was, when it cannot list them all: c marks nothing, a
// shard restored a snapshot since, or more changed than a shard's journal
// holds (ownerJournalLen). The caller then reads the assignments whole and
// marks again. A reader that follows ownership this way costs what changed,
// not what the node owns.
func (s *Store) OwnerChangesSince(c *OwnerCursor, buf []messages.Assignment) ([]messages.Assignment, bool) {
	if len(c.seqs) != len(s.assign) {
		return buf, false
	}
	start := len(buf)
	next := make([]uint64, len(s.assign))
	for i, f := range s.assign {
		ok := true
		f.view(func(st *assignState) {
			if f.restores.Load() != c.restores[i] {
				ok = false
				return
			}
			ok = st.owners.since(c.seqs[i], func(k partKey) {
				a, found := st.get(k.incarnation, k.partition)
				if !found {
					a = messages.Assignment{Incarnation: k.incarnation, Partition: k.partition}
				}
				buf = append(buf, a)
			})
			next[i] = st.owners.seq
		})
		if !ok {
			return buf[:start], false
		}
	}
	copy(c.seqs, next)
	return buf, true
}

// OwnedCount is how many partitions node owns in this replica, moving or
// not: the sizes of its owner indexes, read without a walk.
func (s *Store) OwnedCount(node string) int {
	n := 0
	for _, f := range s.assign {
		f.view(func(st *assignState) { n += len(st.owned[node]) })
	}
	return n
}

// FirstSettled returns, from this replica, up to k of the partitions node
// owns with no target (no move planned), in no particular order: what a
// planning round may move off node costs the round's budget to find, not
// the node's partitions (see assignState.firstSettled). It takes them from
// the shards in turn, so that a round's targets and flips spread over
// every shard's Raft group instead of queueing on the first one's.
func (s *Store) FirstSettled(node string, k int) []messages.PartitionKey {
	if k <= 0 {
		return nil
	}
	// Each shard is asked for its share of k first: taken in turn, that is
	// all a shard gives unless another falls short, and asking each for k
	// walked four times what a round uses (issue 50).
	share := (k + len(s.assign) - 1) / len(s.assign)
	per := s.firstSettledOf(node, share)
	short, full := 0, false
	for _, as := range per {
		short += share - len(as)
		full = full || len(as) == share
	}
	if short > 0 && full && len(s.assign)*share-short < k {
		per = s.firstSettledOf(node, k)
	}
	out := make([]messages.PartitionKey, 0, k)
	for round := 0; len(out) < k; round++ {
		took := false
		for _, as := range per {
			if round < len(as) && len(out) < k {
				out = append(out, as[round])
				took = true
			}
		}
		if !took {
			break
		}
	}
	return out
}

// firstSettledOf is up to k settled partitions of node from each shard.
func (s *Store) firstSettledOf(node string, k int) [][]messages.PartitionKey {
	per := make([][]messages.PartitionKey, len(s.assign))
	for i, f := range s.assign {
		f.view(func(st *assignState) { per[i] = st.firstSettled(node, k, make([]messages.PartitionKey, 0, k)) })
	}
	return per
}

// LeaderAssignment reads one assignment linearizably (the barrier of rule
// X2): it reflects every proposal that completed before the call.
func (s *Store) LeaderAssignment(ctx context.Context, incarnation uint64, partition int) (messages.Assignment, bool, error) {
	shard := AssignmentShard(incarnation, partition, s.cfg.AssignmentShards)
	v, err := s.read(ctx, shard, assignmentQuery{incarnation: incarnation, partition: partition})
	if err != nil {
		return messages.Assignment{}, false, fmt.Errorf("metastore: leader read of assignment %d/%d: %w", incarnation, partition, err)
	}
	a := v.(assignmentAnswer)
	return a.assignment, a.found, nil
}

// ---- change feed ----

// Version changes whenever any shard of this replica applies an entry or
// restores a snapshot: it is the sum of the shards' applied indexes. It is
// local to this replica (compare it only with itself).
func (s *Store) Version() uint64 {
	v := s.meta.applied.Load()
	for _, f := range s.assign {
		v += f.applied.Load()
	}
	return v
}

// TopicsVersion is where this replica's topic records are, for a reader
// that follows them. It is local to this replica (compare it only with
// itself).
type TopicsVersion struct {
	// Any moves when a topic record may have changed (a create, a delete,
	// an alter, a fan-out link attached or detached) or the metadata
	// shard was restored from a snapshot; not with heartbeats, members,
	// users or assignments.
	Any uint64
	// Existing moves as Any does but for the create of a topic without a
	// parent, which changes no record that existed: a reader that learns
	// of new partitions from their owner changes looks at everything it
	// holds only when Existing moves.
	Existing uint64
}

// TopicsVersion reads both of this replica's topics versions at once.
// The partitions supervisor makes a whole pass when Existing moves:
// following the metadata shard's index instead, it made one with every
// heartbeat, a few times a second over every partition the node owns;
// following Any, one with every create, and 3,000 creates onto nodes of
// 100,000 partitions each were more than half of their CPU (issue 50).
func (s *Store) TopicsVersion() TopicsVersion {
	var v TopicsVersion
	s.meta.view(func(m *metaState) { v = TopicsVersion{Any: m.topicsAt, Existing: m.existingAt} })
	return v
}

// AssignmentsVersion is Version over the assignment shards only: it moves
// when an owner or a target changes, and not with every heartbeat (the
// metadata shard applies one per member per interval), so a runner can
// skip a scan while it stands still (rule R2).
func (s *Store) AssignmentsVersion() uint64 {
	var v uint64
	for _, f := range s.assign {
		v += f.applied.Load()
	}
	return v
}

// Changed returns a channel closed at the next apply on any shard of this
// replica after the call; any number of goroutines may wait on it, and each
// call after a change returns a new channel. To miss nothing, take the
// channel before reading the state, then wait:
//
//	for {
//		ch := store.Changed()
//		reconcile(store.OwnedBy(me))
//		select { case <-ch: case <-ctx.Done(): return }
//	}
func (s *Store) Changed() <-chan struct{} { return s.changes.wait() }

// ---- Raft round trips ----

// propose encodes cmd, proposes it to shard with a NO-OP session, and
// decodes the state machine's result into out. Proposals that Dragonboat
// certainly did not append (no leader yet, busy) are retried with back-off
// until ctx or ProposalTimeout ends; any other failure wraps ErrUnavailable
// (outcome unknown).
func (s *Store) propose(ctx context.Context, op string, shard uint64, cmd, out any) error {
	data, err := json.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("metastore: %s: encode: %w", op, err)
	}
	start := s.clock.Now()
	res, err := s.proposeBytes(ctx, shard, data)
	s.metrics.observeProposal(shard, messages.ResultCode(res.Value), err, clock.Since(s.clock, start))
	if err != nil {
		return fmt.Errorf("metastore: %s on shard %d: %w", op, shard, err)
	}
	if err := json.Unmarshal(res.Data, out); err != nil {
		return fmt.Errorf("metastore: %s on shard %d: decode result: %w", op, shard, err)
	}
	return nil
}

func (s *Store) proposeBytes(ctx context.Context, shard uint64, data []byte) (sm.Result, error) {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProposalTimeout)
	defer cancel()
	b := s.newBackoff()
	for {
		res, err := s.nh.SyncPropose(pctx, s.sessions[shard], data)
		if err == nil {
			return res, nil
		}
		if notAppended(err) && b.wait(pctx, s.tick()) == nil {
			continue
		}
		return sm.Result{}, s.classify(ctx, err)
	}
}

// read is a linearizable read (ReadIndex) of shard, retried like a
// proposal while no leader is known (reads are always safe to retry).
func (s *Store) read(ctx context.Context, shard uint64, q any) (any, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ProposalTimeout)
	defer cancel()
	b := s.newBackoff()
	for {
		// Each try waits an election timeout at most: a ReadIndex that
		// reached a leader as it lost the leadership, or whose answer
		// cannot reach this replica yet (a restarted node whose leaders'
		// transport still holds back from it), is dropped unanswered.
		// A read changes nothing, so another try is always safe.
		tctx, tcancel := context.WithTimeout(rctx, time.Duration(s.cfg.ElectionRTT)*s.tick())
		v, err := s.nh.SyncRead(tctx, shard, q)
		// Dragonboat times a try out in its own ticks, which may end it
		// just before tctx does (ErrTimeout); and a try whose deadline was
		// too near to start (a loaded machine between the timer and the
		// call) was not tried either.
		tried := tctx.Err() != nil || errors.Is(err, dragonboat.ErrTimeout) ||
			errors.Is(err, dragonboat.ErrTimeoutTooSmall) || errors.Is(err, dragonboat.ErrInvalidDeadline)
		tcancel()
		if err == nil {
			return v, nil
		}
		if rctx.Err() == nil && (notAppended(err) || tried) && b.wait(rctx, s.tick()) == nil {
			continue
		}
		return nil, s.classify(ctx, err)
	}
}

// notAppended reports Dragonboat errors that prove the request never
// entered the log (dropped for want of a leader, shard busy or still
// loading): safe to retry even for a non-idempotent command.
func notAppended(err error) bool {
	return errors.Is(err, dragonboat.ErrShardNotReady) ||
		errors.Is(err, dragonboat.ErrSystemBusy) ||
		errors.Is(err, dragonboat.ErrShardNotInitialized)
}

// classify maps a Dragonboat error to the package's sentinels. ctx is the
// caller's context: when it ended, its error is wrapped too.
func (s *Store) classify(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, dragonboat.ErrPayloadTooBig):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w (%v)", ErrUnavailable, ctx.Err(), err)
	case dragonboat.IsTempError(err),
		errors.Is(err, dragonboat.ErrClosed),
		errors.Is(err, dragonboat.ErrShardNotFound),
		errors.Is(err, dragonboat.ErrTimeoutTooSmall),
		// The deadline is always set here; invalid means it passed between
		// a retry's back-off and the call.
		errors.Is(err, dragonboat.ErrInvalidDeadline),
		errors.Is(err, dragonboat.ErrCanceled),
		errors.Is(err, dragonboat.ErrAborted),
		errors.Is(err, dragonboat.ErrRejected):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	default:
		return err
	}
}

// tick is one Raft tick, the unit of the retry back-off.
func (s *Store) tick() time.Duration {
	return time.Duration(s.cfg.RTTMillisecond) * time.Millisecond
}

// backoff waits 1, 2, 4 ... 32 ticks between retries, on clock.
type backoff struct {
	n     int
	clock clock.Clock
}

// newBackoff is a back-off on the store's clock.
func (s *Store) newBackoff() backoff { return backoff{clock: s.clock} }

func (b *backoff) wait(ctx context.Context, tick time.Duration) error {
	d := tick << min(b.n, 5)
	b.n++
	return clock.Sleep(ctx, clock.Or(b.clock), d)
}

// codeError turns a non-OK result code into the matching sentinel.
func codeError(op string, code messages.ResultCode) error {
	var sentinel error
	switch code {
	case messages.ResultExists:
		sentinel = ErrExists
	case messages.ResultNotFound:
		sentinel = ErrNotFound
	case messages.ResultRefused:
		sentinel = ErrRefused
	case messages.ResultInvalid:
		sentinel = ErrInvalid
	case messages.ResultConflict:
		sentinel = ErrConflict
	default:
		return fmt.Errorf("metastore: %s: unexpected result code %d", op, code)
	}
	return fmt.Errorf("metastore: %s: %w", op, sentinel)
}
