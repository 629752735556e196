package actors

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/auth"
	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/clusterview"
	"github.com/naradmq/narad/actors/consume"
	"github.com/naradmq/narad/actors/controller"
	"github.com/naradmq/narad/actors/debugfaults"
	"github.com/naradmq/narad/actors/decommission"
	"github.com/naradmq/narad/actors/departure"
	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/actors/hints"
	"github.com/naradmq/narad/actors/mailbox"
	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/actors/produce"
	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/actors/startup"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/actors/sweeper"
	"github.com/naradmq/narad/actors/topics"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Node is one broker node: its metastore replica, ingress WAL, actor tree
// and HTTP server (actors/api over this node's methods, which answer in
// domain terms). Start brings them up in dependency order; Stop takes them
// down in reverse, after the dispatcher committed what the WAL holds.
type Node struct {
	deps
	// The subsystems whose methods are the node's own (api.Node): each is
	// built once what it needs exists, in Start.
	auth.Accounts
	topics.Catalog
	*consume.Leases
	*produce.Intake
	store      *metastore.Store
	wal        *storage.WAL
	system     *actor.ActorSystem
	route      *route.Router // set with the actor system
	partitions *actor.PID
	dispatcher *actor.PID
	controller *actor.PID
	mover      *actor.PID
	sweeper    *actor.PID
	// writes is the node's verdict on its disk (actors/diskhealth).
	writes    writeHealth
	raftAddr  string
	creds     *auth.Credentials    // verified passwords (actors/auth)
	joined    bool                 // started with Join: a non-voter until promoted
	nats      *transport.Transport // nil without NATSURL
	server    *http.Server
	listener  net.Listener
	serveDone chan error
	// stopLoops ends the node's own loops (heartbeat, retention) and what
	// they are waiting on; loops lets Stop wait until they have ended.
	stopLoops context.CancelFunc
	loops     sync.WaitGroup

	ready    atomic.Bool
	stopping atomic.Bool
	// The cluster operations (operations.go): the hand-off before a stop
	// (HandOff, Leaving), the cluster-wide listings and verbs (Members,
	// Moves, AbortMove, the quarantine's), the decommission verbs and
	// drain service, and the way to the controller on the metadata leader.
	*departure.Leaver
	*clusterview.View
	drain *decommission.Drain
	ctl   *controller.Client
	// quarantine is the inventory of the copies set aside, taken at start
	// and handed to the sweeper, whose alone it is from then on.
	quarantine *sweeper.Book
	// flips and installs batch the move workers' flips and installs
	// (actors/mover); the node closes them once the runner stopped.
	flips    *mover.FlipBatcher
	installs *mover.InstallBatcher
	// producing counts the admitted Produce calls not yet returned (rule D6).
	producing atomic.Int64
	// left is closed once this node is no longer a member (leave); leftWhy
	// says why, for every answer it gives from then on.
	left     chan struct{}
	leftOnce sync.Once
	leftWhy  atomic.Pointer[string]
	// faults are the /debug/faults switches (Config.DebugFaults), else nil.
	faults *debugfaults.Switches
}

// Start opens the node's storage and metastore, starts serving HTTP (health
// answers at once; readiness once the metastore caught up), then starts the
// actors. mcfg.Dir defaults to <DataDir>/raft.
func Start(ctx context.Context, cfg Config, mcfg metastore.Config, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if mcfg.NodeID == "" {
		mcfg.NodeID = cfg.NodeID
	}
	if mcfg.Dir == "" && !mcfg.InMemory {
		mcfg.Dir = filepath.Join(cfg.DataDir, "raft")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	log = log.With("node", cfg.NodeID)
	phases := newStartPhases(cfg.steadyOrWall())
	nm := newNodeMetrics(cfg.NodeID)
	nm.buildInfo(cfg.Version)
	var faults *debugfaults.Switches
	if cfg.DebugFaults {
		faults = debugfaults.New(cfg.clockOrWall(), log, nm.faultsInjected)
		cfg = withFaults(cfg, faults)
		log.Warn("fault injection enabled (--debug-faults): /debug/faults fails this node's disk writes or fsyncs and steps its clock on an admin's word; never run this in production")
	}
	cfg = cfg.withClocks()
	n := &Node{deps: deps{cfg: cfg, log: log, metrics: nm, notifier: hints.NewNotifier(cfg.steadyOrWall()), guards: storage.NewGuards(), running: &partition.Running{}},
		serveDone: make(chan error, 1), left: make(chan struct{}), faults: faults}
	var err error
	if n.files, err = storage.NewFiles(cfg.Log.MaxOpenSegmentFiles); err != nil {
		return nil, err
	}
	if n.wal, err = storage.OpenWAL(filepath.Join(cfg.DataDir, "wal"), cfg.WAL); err != nil {
		return nil, fmt.Errorf("open ingress WAL: %w", err)
	}
	n.writes = newWriteHealth(cfg, n.wal, log)
	if !cfg.SyncLane.Disabled {
		// Before any partition opens; closeStores closes it after they closed.
		if n.lane, err = storage.OpenSyncLane(cfg.DataDir, cfg.SyncLane); err != nil {
			n.wal.Close()
			return nil, fmt.Errorf("open sync lane: %w", err)
		}
	}
	// Rule S7: before anything serves, topic directories without a
	// marker go; rule S8: then every copy set aside is listed.
	sweeper.SweepOrphansAtStart(log, cfg.DataDir)
	n.quarantine = sweeper.TakeQuarantineAtStart(log, cfg.steadyOrWall(), cfg.DataDir, n.metrics.sweeperMetrics())
	phases.mark("storage")
	n.raftAddr, n.joined = mcfg.RaftAddr, mcfg.Join
	var idFrom startup.Source
	if mcfg.Join {
		if mcfg.ReplicaID, idFrom, err = n.joiner().ReplicaID(ctx, mcfg.ReplicaID); err != nil {
			n.closeEarly()
			return nil, err
		}
	} else if err := startup.KeepFoundingReplicaID(cfg.DataDir, mcfg.ReplicaID); err != nil {
		n.closeEarly()
		return nil, err
	}
	if mcfg.Metrics == nil {
		mcfg.Metrics = n.metrics.set
	}
	if mcfg.Clock == nil {
		mcfg.Clock = cfg.steadyOrWall()
	}
	if n.store, err = metastore.Open(mcfg, log); err != nil {
		n.closeEarly()
		return nil, fmt.Errorf("open metastore: %w", err)
	}
	phases.mark("metastore_open")
	// Origins go into record frames only once every member reads them.
	n.cfg.Log.Origins = func() bool { return n.store.ClusterVersion() >= messages.ClusterVersionOrigins }
	n.wireHandOff()
	conns := api.NewConnLimit(cfg.MaxHTTPConnections, n.metrics.set, cfg.NodeID)
	if n.listener, err = listenHTTP(cfg, conns); err != nil {
		n.closeStores()
		return nil, err
	}
	n.creds = auth.NewCredentials(cfg.MaxCachedCredentials, cfg.MaxPasswordChecksInFlight, cfg.PasswordHashCost)
	n.Accounts = auth.NewAccounts(auth.AccountsDeps{Config: cfg.accounts(), Store: n.store, Creds: n.creds, Log: log, Clock: cfg.steadyOrWall()})
	opts := api.Options{Log: log, Panics: n.metrics.httpPanics, Security: cfg.SecurityEnabled, NodeID: cfg.NodeID, Metrics: n.metrics.set,
		Clock: cfg.clockOrWall(), Steady: cfg.steadyOrWall(), MaxAuthFailureUsers: cfg.MaxAuthFailureUsers, MaxAuthFailureSources: cfg.MaxAuthFailureSources,
		MaxBatchRecords: cfg.MaxBatchRecords, MaxBatchBytes: cfg.MaxBatchBytes}
	if faults != nil {
		opts.Faults = faults // only then: a nil *debugfaults.Switches is no nil api.Faults
	}
	handler := api.Handler(n, opts)
	n.server = httpServer(cfg, conns, handler, log)
	go func() { n.serveDone <- n.server.Serve(n.listener) }()
	phases.mark("http_listen")
	if cfg.NATSURL != "" {
		if err := n.connectNATS(ctx); err != nil {
			n.abortStart()
			return nil, err
		}
		phases.mark("nats_connect")
	}
	if mcfg.Join {
		// A joining node's replicas wait until a member adds them: ask for
		// that over NATS, then catch up like any node.
		if err := n.joiner().Request(ctx, idFrom); err != nil {
			n.abortStart()
			return nil, err
		}
		if idFrom == startup.FromFlag {
			// Admitted: later starts need no flag.
			if err := startup.WriteReplicaID(cfg.DataDir, mcfg.ReplicaID); err != nil {
				n.abortStart()
				return nil, err
			}
		}
	}
	if err := n.peers().WaitReady(ctx); err != nil {
		n.abortStart()
		return nil, err
	}
	phases.mark("metastore_ready")
	if err := n.register(ctx); err != nil {
		n.abortStart()
		return nil, err
	}
	phases.mark("register")
	if err := n.startActors(); err != nil {
		n.abortStart()
		return nil, err
	}
	phases.mark("actors")
	if _, err := n.request(ctx, n.partitions, partition.Reconcile{}); err != nil {
		n.log.Warn("first reconcile of partitions", "err", err)
	}
	phases.mark("partitions")
	if err := n.serveNATS(); err != nil {
		n.abortStart()
		return nil, err
	}
	n.registerGauges()
	n.ready.Store(true)
	phases.mark("serve_nats")
	log.Info("node ready", append([]any{"http", n.Addr()}, phases.attrs()...)...)
	return n, nil
}

// startPhases times Start's steps for the "node ready" line, so that a
// slow restart is read off the log rather than guessed at. It measures on
// the steady clock: it only reports.
type startPhases struct {
	clock       clock.Clock
	began, last time.Time
	took        []any // phase name, milliseconds, ...
}

func newStartPhases(c clock.Clock) *startPhases {
	now := c.Now()
	return &startPhases{clock: c, began: now, last: now}
}

// mark ends the phase named phase.
func (p *startPhases) mark(phase string) {
	now := p.clock.Now()
	p.took = append(p.took, phase+"_ms", now.Sub(p.last).Milliseconds())
	p.last = now
}

// attrs are the phases' durations and the total, as log attributes.
func (p *startPhases) attrs() []any {
	return append(p.took, "start_ms", p.last.Sub(p.began).Milliseconds())
}

// closeEarly undoes a start that failed before the metastore opened.
func (n *Node) closeEarly() {
	if n.nats != nil {
		n.nats.Close()
	}
	n.wal.Close()
	n.closeLane()
}

// startActors spawns the actor tree and starts the node's loops; a spawn
// that fails is returned, and abortStart shuts down what did start.
func (n *Node) startActors() error {
	alog := slog.New(quietHandler{n.log.Handler()}).With("lib", "protoactor")
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return alog }))
	n.route = &route.Router{Self: n.cfg.NodeID, System: n.system, Replica: n.store, NATS: n.nats, Timeout: n.cfg.RequestTimeout, LeaseTimeout: n.cfg.leaseRequestTimeout(), GroupWait: min(n.cfg.MoveGroupWaitFor, n.cfg.RequestTimeout), Clock: n.cfg.steadyOrWall(), Running: n.running}
	strategy := &supervise.Restarts{MaxRestarts: n.cfg.PartitionMaxRestarts, Window: n.cfg.PartitionRestartWindow,
		Backoff: n.cfg.PartitionRestartBackoff, Log: n.log, Clock: n.cfg.steadyOrWall(), Restarted: n.metrics.actorRestarts, Stopped: n.metrics.partitionFailed}
	workers := &supervise.Restarts{MaxRestarts: n.cfg.Mover.WorkerMaxRestarts, Window: n.cfg.Mover.WorkerRestartWindow,
		Backoff: n.cfg.Mover.WorkerRestartBackoff, Log: n.log, Clock: n.cfg.steadyOrWall(), Restarted: n.metrics.workerRestarts, Stopped: n.metrics.workersStopped}
	owned := new(atomic.Int64)
	n.metrics.gauge("narad_partitions_owned", func() float64 { return float64(owned.Load()) })
	n.metrics.gauge("narad_partitions_resting", func() float64 { return float64(n.running.Closed()) })
	n.metrics.gauge("narad_disk_full", func() float64 {
		if n.writes.Full() {
			return 1
		}
		return 0
	})
	pacerPID, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newPacerActor(n.deps) }), freeze.PacerName)
	if err != nil {
		return fmt.Errorf("spawn the freeze pacer: %w", err)
	}
	n.pacer = &pacer{pid: pacerPID}
	d := n.deps
	pd := partitionDeps(d, newFanoutDeps(n.cfg, n.log, n.metrics, n.route), partition.NewFigures(n.metrics.set, n.metrics.node))
	pd.Opens = make(chan struct{}, n.cfg.MaxParallelPartitionOpens)
	mb := mailbox.New(n.cfg.steadyOrWall(), 300, mailbox.Idle)
	pd.Mailboxes = mb
	n.partitions, err = n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return partition.NewSupervisor(pd, n.store, owned)
	}, actor.WithSupervisor(strategy)), partition.SupervisorName)
	if err != nil {
		return fmt.Errorf("spawn partitions supervisor: %w", err)
	}
	n.dispatcher, err = n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return dispatch.New(newDispatchDeps(d, n.store, n.wal, route.NewGroupedOwners(n.route, n.cfg.groupConfig(), n.metrics.groupMetrics())))
	}, actor.WithDispatcher(mb)), dispatch.Name)
	if err != nil {
		return fmt.Errorf("spawn dispatcher: %w", err)
	}
	sd := sweeper.Deps{NodeID: n.cfg.NodeID, DataDir: n.cfg.DataDir, LogConfig: n.cfg.Log, RequestTimeout: n.cfg.RequestTimeout,
		Config: n.cfg.Sweep, Logger: n.log, Guards: n.guards, Store: n.store, Owners: n.route, Metrics: n.metrics.sweeperMetrics()}
	n.sweeper, err = n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return sweeper.New(sd, n.quarantine)
	}), sweeper.Name)
	if err != nil {
		return fmt.Errorf("spawn sweeper: %w", err)
	}
	md := newMoverDeps(n, n.partitions, n.sweeper)
	n.flips, n.installs = md.Flips, md.Installs
	n.mover, err = n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return mover.New(md)
	}, actor.WithSupervisor(workers)), mover.Name)
	if err != nil {
		return fmt.Errorf("spawn mover: %w", err)
	}
	cd := controller.Deps{Config: n.cfg.Controller, Membership: n.cfg.Membership, Timeout: n.cfg.ControllerTimeout,
		RequestTimeout: n.cfg.RequestTimeout, MaxInFlightMoves: n.cfg.MaxInFlightMoves, Logger: n.log, Store: n.store,
		NATS: n.nats, Metrics: n.metrics.controllerMetrics(), Clock: n.cfg.steadyOrWall()}
	n.controller, err = n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return controller.New(cd)
	}), controller.Name)
	if err != nil {
		return fmt.Errorf("spawn controller: %w", err)
	}
	n.Catalog = topics.New(topics.Deps{Config: n.cfg.topics(), Store: n.store, Owners: n.route,
		AskController: n.askController, Reconcile: n.reconcile, Log: n.log, Clock: n.cfg.steadyOrWall()})
	var admitted func(string, []byte)
	if f := n.cfg.faults; f != nil {
		admitted = f.produceAdmitted
	}
	n.Intake = produce.New(produce.Deps{Config: n.cfg.produce(), Store: n.store, Owners: n.route, Backlog: n.wal,
		Append: n.appendWAL, AppendMany: n.appendWALMany, WriteOK: func() { n.writes.succeeded(n.log) },
		WriteFailed: func(err error) { n.writes.failed(err, n.log) }, Draining: n.draining, Stopping: &n.stopping,
		Producing: &n.producing, Root: n.system.Root, Dispatcher: n.dispatcher, Admitted: admitted,
		Metrics: n.metrics.produce, Log: n.log, Clock: n.cfg.steadyOrWall()})
	n.Leases = consume.New(consume.Deps{Config: n.cfg.consume(), Store: n.store, Owners: n.route, Notifier: n.notifier,
		Metrics: n.metrics.consume, Clock: n.cfg.steadyOrWall()})
	loops, stop := context.WithCancel(context.Background())
	n.stopLoops = stop
	root, parts, every, steady := n.system.Root, n.partitions, n.cfg.RetentionInterval, n.cfg.steadyOrWall()
	n.loops.Go(func() {
		t := clock.NewTicker(steady, every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				root.Send(parts, partition.RetentionTick{})
			case <-loops.Done():
				return
			}
		}
	})
	if n.nats != nil {
		n.loops.Go(func() {
			n.notifier.SendNotices(loops, n.nats, n.cfg.CommitNoticeInterval, func(error) { n.metrics.noticesLost.Inc() })
		})
	}
	n.loops.Go(func() { n.heartbeat(loops) })
	n.loops.Go(func() { n.writes.Probe(loops) })
	if n.cfg.SecurityEnabled {
		n.loops.Go(func() { n.SeedAdmin(loops) })
	}
	n.wireOperations()
	n.loops.Go(func() {
		select {
		case <-n.store.Removed():
			n.leave(n.removedWhy())
		case <-loops.Done():
		}
	})
	return nil
}

// serveNATS registers everything peers and operators reach over NATS:
// partitions, chunks, the controller, drain and move progress, and the
// admin verbs. It runs once the actors do, so no request meets a node half
// started; until then only the node's own ping and the status verb are
// served (connectNATS).
func (n *Node) serveNATS() error {
	if n.nats == nil {
		return nil
	}
	heard := func(_ string, body []byte) {
		if n.notifier.HeardNotice(body) != nil {
			n.metrics.noticesLost.Inc()
		}
	}
	interest := func(string, []byte) { n.notifier.HeardInterest(n.cfg.steadyOrWall().Now()) }
	if err := errors.Join(n.route.Serve(), n.nats.Watch(hints.NoticeService, heard), n.nats.Watch(hints.InterestService, interest), n.ctl.Serve(), n.drain.Serve(n.nats), n.ServeMoves(), n.peers().Serve(), n.serveAdmin(n.nats)); err != nil {
		return fmt.Errorf("serve over nats: %w", err)
	}
	return nil
}

// register records this node as a member (startup.Peers.Register).
func (n *Node) register(ctx context.Context) error {
	role := messages.RoleVoter
	if n.joined {
		role = messages.RoleNonVoter
	}
	// A cluster already past what this binary reads holds formats it
	// cannot read: refused before it serves (a downgrade past a gate).
	if v := n.store.ClusterVersion(); v > messages.ClusterVersionNewest {
		return fmt.Errorf("the cluster is at version %d and this binary reads up to %d: run a newer narad", v, messages.ClusterVersionNewest)
	}
	return n.peers().Register(ctx, messages.Member{ID: n.cfg.NodeID, ReplicaID: n.store.ReplicaID(), HTTPAddr: n.Addr(), RaftAddr: n.raftAddr, Role: role,
		Reads: messages.ClusterVersionNewest})
}

// heartbeat bumps this node's heartbeat counter every HeartbeatInterval
// until the node stops. A node found missing (removed) registers again.
//
// With NATS, a beat is only sent after a round trip through the bus: the
// metastore's Raft traffic is separate TCP, so a node cut off from NATS
// could otherwise keep heartbeating while no peer can reach its
// partitions. Alive means "reachable for data", so such a node goes silent
// and the leader marks it dead; it is alive again once the bus answers.
//
// A metadata leader cut off from NATS would still judge liveness and
// answer nobody's controller requests, so once the bus has been silent for
// DeadTimeout (when the others see it dead) it hands its leaderships to
// other voters, at most once per DeadTimeout: if NATS is down for every
// node, leadership moves that slowly instead of churning.
func (n *Node) heartbeat(ctx context.Context) {
	steady := n.cfg.steadyOrWall()
	t := clock.NewTicker(steady, n.cfg.Membership.HeartbeatInterval)
	defer t.Stop()
	var silentSince time.Time // zero while the bus answers
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-n.left:
			return
		}
		beat, cancel := context.WithTimeout(ctx, n.cfg.Membership.HeartbeatInterval)
		if err := n.pingBus(beat); err != nil {
			cancel()
			now := steady.Now()
			if silentSince.IsZero() {
				n.log.Warn("heartbeat withheld: NATS does not answer this node", "err", err)
				silentSince = now
			}
			n.metrics.heartbeatWithheld()
			if now.Sub(silentSince) >= n.cfg.Membership.DeadTimeout {
				n.stepDown(ctx)
				silentSince = now
			}
			continue
		}
		if !silentSince.IsZero() {
			n.log.Info("heartbeat resumed: NATS answers this node again")
			silentSince = time.Time{}
		}
		err := n.store.Heartbeat(beat, n.cfg.NodeID)
		cancel()
		if errors.Is(err, metastore.ErrNotFound) {
			// The leader applied the beat and found no record: this node
			// registered before its loops started, so only a removal
			// explains it, and a node removed does not let itself back in.
			n.leave("removed from the member list")
			return
		}
		if err != nil {
			n.log.Warn("heartbeat", "err", err)
		}
	}
}

// stepDown hands every shard this node leads to another voter, if it
// leads the metadata shard (see heartbeat).
func (n *Node) stepDown(ctx context.Context) {
	me := n.store.ReplicaID()
	if leader, ok := n.store.Leader(metastore.MetaShard); !ok || leader != me {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Membership.DeadTimeout)
	defer cancel()
	if err := n.store.TransferAllLeadership(ctx, me); err != nil {
		n.log.Warn("cut off from NATS: could not hand off the metastore leaderships", "err", err)
		return
	}
	n.log.Warn("cut off from NATS: handed off the metastore leaderships")
}

// pingService answers a node's own round trip through NATS (pingBus).
const pingService = "ping"

// pingBus sends an empty request to this node's own ping service through
// the NATS server. Without NATS there is no bus to be cut from.
func (n *Node) pingBus(ctx context.Context) error {
	if n.nats == nil {
		return nil
	}
	_, err := n.nats.Request(ctx, n.cfg.NodeID, pingService, nil)
	return err
}

func (n *Node) registerGauges() {
	n.metrics.gauge("narad_wal_backlog_records", func() float64 { r, _ := n.wal.Backlog(); return float64(r) })
	n.metrics.gauge("narad_wal_backlog_bytes", func() float64 { _, b := n.wal.Backlog(); return float64(b) })
	// What a record costs in syncs: the WAL writer's fsyncs, and the sync
	// lane's syncs against the partition syncs they answered.
	n.metrics.counters([]string{"narad_wal_syncs_total", "narad_sync_lane_syncs_total", "narad_sync_lane_requests_total"}, func() []uint64 {
		var lane storage.SyncLaneStats
		if n.lane != nil {
			lane = n.lane.Stats()
		}
		return []uint64{uint64(n.wal.Stats().Syncs), lane.Batches, lane.Requests}
	})
	// Walked at scrape time: a staging copy is a move in flight, and moves
	// in flight are bounded (MaxInFlightMoves).
	n.metrics.gauge("narad_staging_disk_bytes", func() float64 { return float64(storage.StagingBytes(n.cfg.DataDir)) })
	// Raft role and term per metastore shard, read at scrape time.
	for _, sh := range n.store.Shards() {
		shard := sh
		n.metrics.set.GetOrCreateGauge(fmt.Sprintf(`narad_raft_leader{node=%q,shard="%d"}`, n.cfg.NodeID, shard), func() float64 {
			if id, _, ok := n.store.LeaderOf(shard); ok && id == n.store.ReplicaID() {
				return 1
			}
			return 0
		})
		n.metrics.set.GetOrCreateGauge(fmt.Sprintf(`narad_raft_term{node=%q,shard="%d"}`, n.cfg.NodeID, shard), func() float64 {
			_, term, _ := n.store.LeaderOf(shard)
			return float64(term)
		})
	}
}

// removedWhy names why the metastore removed this node's replica: a
// decommission when its last record (the replica's own, which stopped
// applying at the removal) shows it draining.
func (n *Node) removedWhy() string {
	if m, ok := n.store.Member(n.cfg.NodeID); ok && m.Draining {
		return "decommissioned"
	}
	return "removed from the metastore's Raft group"
}

// leave makes this node stop being one, once: it reads not ready, every
// client call and /readyz answer that it left and why (api.LeftReason),
// its heartbeat ends, and its NATS connection closes, which takes it out
// of the admin verbs' queue group and of the peer services, so no request
// waits on a node that serves nothing. Left is closed last, so whoever
// waits on it (narad serve, which then exits) sees all of that done.
func (n *Node) leave(why string) {
	n.leftOnce.Do(func() {
		n.leftWhy.Store(&why)
		n.ready.Store(false)
		n.log.Warn("this node left the cluster; it serves nothing from now on", "why", why)
		if n.nats != nil {
			n.nats.Close()
		}
		close(n.left)
	})
}

// Left is closed once this node left the cluster: decommissioned, or
// removed from the members or from the metastore's Raft group by any path.
func (n *Node) Left() <-chan struct{} { return n.left }

// LeftReason is "" while the node is a member, else the sentence every
// answer gives.
func (n *Node) LeftReason() string {
	why := n.leftWhy.Load()
	if why == nil {
		return ""
	}
	return fmt.Sprintf("node %s left the cluster (%s); it serves nothing", n.cfg.NodeID, *why)
}

// Ready is true once the node serves: its metastore replica caught up and
// its actors run. Stop clears it.
func (n *Node) Ready() bool { return n.ready.Load() }

// Stopping is true once Stop began.
func (n *Node) Stopping() bool { return n.stopping.Load() }

// request sends a message to an actor and waits for its answer.
func (n *Node) request(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	return route.Request(ctx, n.system.Root, pid, msg, n.cfg.RequestTimeout)
}

// Addr is the HTTP address the node listens on.
func (n *Node) Addr() string { return n.listener.Addr().String() }

// Store is the node's metastore replica.
func (n *Node) Store() *metastore.Store { return n.store }

// Stop shuts the node down: produce answers 503 at once, the dispatcher
// gets up to ShutdownDrainTimeout to commit what the ingress WAL holds,
// then HTTP stops, partitions write their consumer state and close, and the
// WAL and metastore close. What the WAL still holds is replayed at the next
// start.
func (n *Node) Stop(ctx context.Context) error {
	if n.stopping.Swap(true) {
		return nil
	}
	n.ready.Store(false)
	drain, cancel := context.WithTimeout(ctx, n.cfg.ShutdownDrainTimeout)
	defer cancel()
	if err := n.waitDrained(drain); err != nil {
		held, _ := n.wal.Backlog()
		n.log.Warn("stopping with records still in the ingress WAL; they are committed at the next start", "records", held)
	}
	shut, cancelShut := context.WithTimeout(ctx, 10*time.Second)
	defer cancelShut()
	err := n.server.Shutdown(shut)
	if serr := <-n.serveDone; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	// The dispatcher stops while NATS still carries its commits in
	// flight: it waits for their outcomes (each bounded by RequestTimeout)
	// and releases what they committed. A commit cut off by the closed
	// connection would have an unknown outcome, and its records, maybe
	// committed, would be replayed at the next start: duplicates after a
	// clean stop.
	n.system.Root.StopFuture(n.dispatcher).Wait()
	if n.nats != nil {
		n.nats.Close()
	}
	n.stopLoops()
	n.loops.Wait()
	n.system.Root.StopFuture(n.controller).Wait()
	n.system.Root.StopFuture(n.mover).Wait()
	// The mover's ticks start sweeps: the sweeper stops after it, ending a
	// pass, walk or release under way before the stores close under it.
	n.system.Root.StopFuture(n.sweeper).Wait()
	n.flips.Close()
	n.installs.Close()
	n.system.Root.StopFuture(n.partitions).Wait()
	// After the partitions: each tells the pacer its freeze ended as it
	// closes.
	n.system.Root.StopFuture(n.pacer.pid).Wait()
	n.system.Shutdown()
	if cerr := n.closeStores(); err == nil {
		err = cerr
	}
	n.log.Info("node stopped")
	return err
}

func (n *Node) waitDrained(ctx context.Context) error {
	t := clock.NewTicker(n.cfg.steadyOrWall(), 20*time.Millisecond)
	defer t.Stop()
	for {
		if held, _ := n.wal.Backlog(); held == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (n *Node) abortStart() {
	if n.nats != nil {
		n.nats.Close()
	}
	if n.system != nil {
		if n.stopLoops != nil {
			n.stopLoops()
			n.loops.Wait()
		}
		if n.sweeper != nil {
			n.system.Root.StopFuture(n.sweeper).Wait()
		}
		n.system.Shutdown()
	}
	if n.flips != nil {
		n.flips.Close()
	}
	n.installs.Close()
	n.server.Close()
	<-n.serveDone
	n.closeStores()
}

func (n *Node) closeStores() error {
	err := n.wal.Close()
	n.store.Close()
	if cerr := n.closeLane(); err == nil {
		err = cerr
	}
	return err
}

func (n *Node) closeLane() error {
	if n.lane == nil {
		return nil
	}
	return n.lane.Close()
}

// listenHTTP listens for the client API, over TLS when the config names a
// certificate, counting connections under TLS (conns). The certificate is
// loaded here, so a bad one stops the start.
func listenHTTP(cfg Config, conns *api.ConnLimit) (net.Listener, error) {
	var tc *tls.Config
	if cfg.HTTPTLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.HTTPTLSCertFile, cfg.HTTPTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("http tls: %w", err)
		}
		tc = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	ln = conns.Listener(ln)
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	return ln, nil
}

// httpReadTimeout bounds reading one request, body included (the
// contract's read timeout); httpIdleTimeout, how long a keep-alive
// connection waits for its next request.
const (
	httpReadTimeout = 10 * time.Second
	httpIdleTimeout = 60 * time.Second
)

// httpServer is the client API's server. ReadHeaderTimeout cuts off a
// client that trickles its headers: without it, one holds a connection
// for the whole read timeout on a few bytes. conns answers the
// connections past MaxHTTPConnections.
func httpServer(cfg Config, conns *api.ConnLimit, handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: conns.Handler(handler), ConnContext: conns.ConnContext, ReadHeaderTimeout: cfg.HTTPReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: cfg.HTTPWriteTimeout, IdleTimeout: httpIdleTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// reconcile has the partitions supervisor start and stop this node's
// partition actors as the replica now places them.
func (n *Node) reconcile(ctx context.Context) error {
	_, err := n.request(ctx, n.partitions, partition.Reconcile{})
	return err
}
