package startup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// A node that restarts is ready once its metastore replica has applied
// everything committed before it asked (CONTRACT.md §4: /readyz means
// "metastore caught up"). Its own ReadIndex waits for the shard leaders to reach it,
// and after a SIGKILL the survivors' Raft transport holds back from the
// restarted address for up to a second (Dragonboat's circuit breaker trips
// on the first failed send). A peer that is ready answers over NATS at
// once: the applied index of every shard, each read linearizably there. A
// replica whose own applied indexes reach those is as current as its own
// ReadIndex would have made it, so whichever way finishes first makes the
// node ready (the node's waitCaughtUp).
//
// Its registration is a proposal, and a proposal returns once this
// replica applied it: the same wait. So a restarted node asks a ready peer
// to propose it (registerService) and goes on once it committed there;
// its own replica applies it when the leaders reach it. Without a peer
// that answers (a whole cluster starting, no NATS) it proposes itself.

// appliedService answers a peer's ask for this node's linearizable applied
// indexes; only a ready node serves it (the node serves it last in its Start).
const appliedService = "applied"

// appliedReply is appliedService's answer, in metastore.Store.Shards order.
type appliedReply struct {
	Shards  []uint64 `json:"shards"`
	Applied []uint64 `json:"applied"`
}

// peerReadyRetry is how long readyFromPeers waits before asking again when
// no peer answered (none ready yet, or the bus not yet routing).
const peerReadyRetry = 100 * time.Millisecond

// ErrNoPeerReady: no peer could be asked. It never fails a start: the
// replica's own wait goes on.
var ErrNoPeerReady = errors.New("no ready peer answered")

// PeerStore is what a start reads of the local replica and proposes, for
// itself or for a peer.
type PeerStore interface {
	ReplicaID() uint64
	Member(id string) (messages.Member, bool)
	Members() []messages.Member
	// WaitReady returns once the replica's own ready reads say it caught
	// up; Removed is closed once it applied its own removal.
	WaitReady(ctx context.Context) error
	Removed() <-chan struct{}
	Shards() []uint64
	Applied(ctx context.Context) ([]uint64, error)
	WaitApplied(ctx context.Context, want []uint64) error
	PutMember(ctx context.Context, m messages.Member) (messages.Member, error)
}

// Peers is a restart's way around the shard leaders: the ready peers'
// applied indexes and their proposal of its registration, over NATS, and
// the services that answer them on a ready node.
type Peers struct {
	NodeID string
	// NATS is the node's connection; nil (no NATS) asks no peer.
	NATS           *transport.Transport
	Store          PeerStore
	RequestTimeout time.Duration
	Metrics        Metrics
	Log            *slog.Logger
	// Clock paces the asks again while no peer answers: the wall clock in
	// a node (a start is not a decision a test steps).
	Clock clock.Clock
}

// Metrics are a start's series in the node's set.
type Metrics struct {
	// ReadyFromPeer counts starts whose replica was found caught up by a
	// peer's applied indexes before its own ready reads.
	ReadyFromPeer *metrics.Counter
	// RegisteredThroughPeer counts starts whose registration a peer
	// proposed.
	RegisteredThroughPeer *metrics.Counter
}

// NewMetrics registers a start's series of node in set.
func NewMetrics(set *metrics.Set, node string) Metrics {
	return Metrics{
		ReadyFromPeer:         set.GetOrCreateCounter(fmt.Sprintf(`narad_ready_from_peer_total{node=%q}`, node)),
		RegisteredThroughPeer: set.GetOrCreateCounter(fmt.Sprintf(`narad_registered_through_peer_total{node=%q}`, node)),
	}
}

// registerRetry is how long a registration this node proposes itself
// waits before it proposes again after a timeout.
const registerRetry = 100 * time.Millisecond

// Serve registers the services a ready node answers its restarting
// peers with.
func (p Peers) Serve() error { return errors.Join(p.ServeApplied(), p.ServeRegister()) }

// registerService proposes a peer's registration (Store.PutMember) for it.
const registerService = "register"

// ServeRegister answers a peer's ask to propose its registration.
func (p Peers) ServeRegister() error {
	return transport.HandleJSON(p.NATS, registerService, func(ctx context.Context, from string, m messages.Member) (messages.Member, error) {
		if m.ID != from {
			return messages.Member{}, transport.Errorf(transport.StatusBadRequest, "%s may register itself only, not %q", from, m.ID)
		}
		ctx, cancel := context.WithTimeout(ctx, p.RequestTimeout)
		defer cancel()
		rec, err := p.Store.PutMember(ctx, m)
		switch {
		case errors.Is(err, metastore.ErrExists):
			return rec, transport.Errorf(409, "%v", err)
		case errors.Is(err, metastore.ErrInvalid):
			return rec, transport.Errorf(transport.StatusBadRequest, "%v", err)
		case err != nil:
			return rec, transport.Errorf(transport.StatusUnavailable, "%v", err)
		}
		return rec, nil
	})
}

// WaitReady waits until the metastore replica caught up. A replica that
// applies its own removal meanwhile (the data dir of a node that left,
// started again) never will: that is said at once.
func (p Peers) WaitReady(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.Store.Removed():
			cancel()
		case <-wctx.Done():
		}
	}()
	err := p.waitCaughtUp(wctx)
	select {
	case <-p.Store.Removed():
		return fmt.Errorf("the metastore removed replica id %d: this data dir belongs to a node that left the cluster; start with an empty data dir (and without --replica-id) to join again: %w",
			p.Store.ReplicaID(), errs.ErrInvalid)
	default:
	}
	if err != nil {
		return fmt.Errorf("metastore not ready: %w", err)
	}
	return nil
}

// waitCaughtUp waits for the replica's own ready reads (Store.WaitReady)
// and, beside them, for a ready peer's applied indexes (ReadyFromPeers):
// the first to finish makes the replica caught up. Only the replica's own
// wait can fail the start; both have ended when it returns.
func (p Peers) waitCaughtUp(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	own, peers := make(chan error, 1), make(chan error, 1)
	go func() { own <- p.Store.WaitReady(ctx) }()
	go func() { peers <- p.ReadyFromPeers(ctx) }()
	var err error
	select {
	case err = <-own:
		cancel()
		<-peers
	case perr := <-peers:
		if perr == nil {
			p.Metrics.ReadyFromPeer.Inc()
			cancel()
			<-own
			return nil
		}
		err = <-own
	}
	return err
}

// Register records this node as the member m, through a ready peer if
// one answers. A re-registration after a restart keeps the drain flag
// (rule D1) and reads alive again.
func (p Peers) Register(ctx context.Context, m messages.Member) error {
	// A peer's refusal is not final: the proposal of its own below says
	// what is wrong, or outlasts what was in the way.
	before, found := p.Store.Member(p.NodeID)
	if rec, err := p.RegisterThroughPeer(ctx, m); err == nil {
		p.Metrics.RegisteredThroughPeer.Inc()
		if !RegistrationChanges(before, found, m) {
			return nil
		}
		if err := p.WaitMetaApplied(ctx, rec.Registered); err != nil {
			return fmt.Errorf("register member %s: apply its registration: %w", p.NodeID, err)
		}
		return nil
	}
	for {
		_, err := p.Store.PutMember(ctx, m)
		if err == nil {
			return nil
		}
		// A proposal that timed out (a busy or electing shard) may be
		// repeated: a registration is idempotent. The caller's ctx bounds it.
		if !errors.Is(err, metastore.ErrUnavailable) || ctx.Err() != nil {
			return fmt.Errorf("register member %s: %w", p.NodeID, err)
		}
		p.Log.Warn("register member: retrying", "err", err)
		if clock.Sleep(ctx, p.Clock, registerRetry) != nil {
			return fmt.Errorf("register member %s: %w", p.NodeID, err)
		}
	}
}

// RegisterThroughPeer asks the peers in turn, not all at once (each would
// propose it), to propose m, and returns the record once one answered
// that it committed.
func (p Peers) RegisterThroughPeer(ctx context.Context, m messages.Member) (messages.Member, error) {
	if p.NATS == nil {
		return messages.Member{}, ErrNoPeerReady
	}
	errs := ErrNoPeerReady
	for _, peer := range p.peersOf() {
		rctx, cancel := context.WithTimeout(ctx, p.RequestTimeout)
		var rec messages.Member
		err := transport.RequestJSON(rctx, p.NATS, peer, registerService, m, &rec)
		cancel()
		if err == nil {
			return rec, nil
		}
		errs = errors.Join(errs, err)
	}
	return messages.Member{}, errs
}

// RegistrationChanges reports whether registering m changes what this
// node reads of itself in before (found: it had a record): a node that
// was leaving, dead, or moved must read itself registered once Start
// returns, so its start waits for its own replica to apply that.
func RegistrationChanges(before messages.Member, found bool, m messages.Member) bool {
	return !found || before.Leaving || before.Status != messages.MemberAlive || before.ReplicaID != m.ReplicaID ||
		before.HTTPAddr != m.HTTPAddr || before.RaftAddr != m.RaftAddr || (m.Role != "" && before.Role != m.Role)
}

// WaitMetaApplied waits until this replica applied the metadata shard's
// entry at index.
func (p Peers) WaitMetaApplied(ctx context.Context, index uint64) error {
	want := make([]uint64, len(p.Store.Shards()))
	want[0] = index // Shards() starts with the metadata shard
	return p.Store.WaitApplied(ctx, want)
}

// ServeApplied answers a peer's ask for this replica's applied indexes,
// each read linearizably.
func (p Peers) ServeApplied() error {
	return transport.HandleJSON(p.NATS, appliedService, func(ctx context.Context, _ string, _ struct{}) (appliedReply, error) {
		ctx, cancel := context.WithTimeout(ctx, p.RequestTimeout)
		defer cancel()
		idx, err := p.Store.Applied(ctx)
		if err != nil {
			return appliedReply{}, transport.Errorf(transport.StatusUnavailable, "%v", err)
		}
		return appliedReply{Shards: p.Store.Shards(), Applied: idx}, nil
	})
}

// ReadyFromPeers asks the other members this replica knows, all at once,
// for their applied indexes until one answers, then waits for this replica
// to apply as much. It ends with ctx (the other way won, or the start was
// abandoned), or at once with ErrNoPeerReady without NATS.
func (p Peers) ReadyFromPeers(ctx context.Context) error {
	if p.NATS == nil {
		return ErrNoPeerReady
	}
	for {
		// The members are the replica's: right after Open it may not have
		// replayed them yet.
		peers := p.peersOf()
		err := ErrNoPeerReady
		if len(peers) > 0 {
			var want []uint64
			if want, err = p.askApplied(ctx, peers); err == nil {
				return p.Store.WaitApplied(ctx, want)
			}
		}
		if clock.Sleep(ctx, p.Clock, peerReadyRetry) != nil {
			return fmt.Errorf("ready from peers: %w (last: %w)", ctx.Err(), err)
		}
	}
}

// askApplied asks every peer at once (a read: each may do it) and returns
// the first answer that names this replica's shards; the other asks end
// with the call. It fails only when every peer failed.
func (p Peers) askApplied(ctx context.Context, peers []string) ([]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.RequestTimeout)
	defer cancel()
	shards := p.Store.Shards()
	type answer struct {
		applied []uint64
		err     error
	}
	answers := make(chan answer, len(peers))
	for _, peer := range peers {
		go func() {
			var rep appliedReply
			err := transport.RequestJSON(ctx, p.NATS, peer, appliedService, struct{}{}, &rep)
			if err == nil && (!slices.Equal(rep.Shards, shards) || len(rep.Applied) != len(shards)) {
				err = fmt.Errorf("%s answered %d indexes of shards %v, this replica has shards %v", peer, len(rep.Applied), rep.Shards, shards)
			}
			answers <- answer{rep.Applied, err}
		}()
	}
	errs := ErrNoPeerReady
	for range peers {
		a := <-answers
		if a.err == nil {
			return a.applied, nil
		}
		errs = errors.Join(errs, a.err)
	}
	return nil, errs
}

// peersOf is every member this replica knows but this node.
func (p Peers) peersOf() []string {
	var peers []string
	for _, m := range p.Store.Members() {
		if m.ID != p.NodeID {
			peers = append(peers, m.ID)
		}
	}
	return peers
}
