package actors

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/clusterview"
	"github.com/naradmq/narad/actors/controller"
	"github.com/naradmq/narad/actors/debugfaults"
	"github.com/naradmq/narad/actors/decommission"
	"github.com/naradmq/narad/actors/departure"
	"github.com/naradmq/narad/actors/diskhealth"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The node's cluster operations each live in a package of their own:
// decommission (the verb and the drain service), clusterview (the members,
// moves and quarantine listings and verbs), departure (the hand-off at
// shutdown), controller.Client (asking the controller on the metadata
// leader), diskhealth (the disk's verdict and its probe) and debugfaults
// (the nemesis's switches). This file builds them and holds the adapters
// that actors/api, cmd and the node's other files call. Their cadences run
// on the wall clock: they wait against context deadlines, which a stepped
// or fake clock would not move.

// wireHandOff builds the hand-off once the metastore replica is open:
// /readyz reads Leaving from the first request on.
func (n *Node) wireHandOff() {
	n.Leaver = departure.New(departure.Deps{NodeID: n.cfg.NodeID, Replica: n.store, Logger: n.log,
		RetryAfter: n.cfg.Move.RetryAfter, Stopping: n.Stopping, Clock: n.cfg.steadyOrWall()})
}

// wireOperations builds the operations that ask the node's actors and
// peers, once the actors run; none of them is reached before the node
// serves (serveNATS, Ready).
func (n *Node) wireOperations() {
	n.drain = decommission.New(decommission.Deps{NodeID: n.cfg.NodeID, Replica: n.store, Logger: n.log,
		WALBacklog: func() int64 { held, _ := n.wal.Backlog(); return held }, Producing: n.producing.Load})
	n.View = clusterview.New(clusterview.Deps{NodeID: n.cfg.NodeID, RequestTimeout: n.cfg.RequestTimeout, Replica: n.store,
		Logger: n.log, NATS: n.nats, Request: n.request, Mover: n.mover, Pacer: n.pacer.pid, Sweeper: n.sweeper,
		MovesDone: n.metrics.movesDone, MoveBytes: n.metrics.moveBytes, Clock: n.cfg.steadyOrWall()})
	n.ctl = controller.NewClient(controller.ClientDeps{NodeID: n.cfg.NodeID, Timeout: n.cfg.ControllerTimeout,
		Replica: n.store, NATS: n.nats, Root: n.system.Root, Local: n.controller, Clock: n.cfg.steadyOrWall()})
}

// Decommission judges whether member id can ever leave and, unless dryRun
// or refused, marks it draining (actors/decommission).
func (n *Node) Decommission(ctx context.Context, id string, dryRun bool) (api.DecommissionVerdict, error) {
	v, err := n.drain.Decommission(ctx, id, dryRun)
	return api.DecommissionVerdict(v), err
}

// CancelDecommission clears member id's drain flag.
func (n *Node) CancelDecommission(ctx context.Context, id string) error {
	return fromMetastore(n.drain.CancelDecommission(ctx, id))
}

// Forget forgets dead member id, whose disk is lost (actors/decommission).
func (n *Node) Forget(ctx context.Context, id string, dryRun, acceptDataLoss bool) (api.ForgetVerdict, error) {
	v, err := n.drain.Forget(ctx, id, dryRun, acceptDataLoss)
	return api.ForgetVerdict(v), err
}

// draining reports whether this node is being decommissioned (rule D6).
func (n *Node) draining() bool { return n.drain.Draining() }

// askController sends req to the controller on the metadata leader.
func (n *Node) askController(ctx context.Context, req messages.ControllerRequest) (messages.ControllerReply, error) {
	return n.ctl.Ask(ctx, req)
}

// movesWithSummary, pacingCounts and the quarantine's are the admin verbs'
// names for the cluster view's answers.
func (n *Node) movesWithSummary(ctx context.Context, detail bool) messages.MoveList {
	return n.MovesWithSummary(ctx, detail)
}
func (n *Node) pacingCounts(ctx context.Context) (frozen, held int) { return n.PacingCounts(ctx) }
func (n *Node) serveQuarantine() error                              { return n.ServeQuarantine() }
func (n *Node) adminQuarantine(ctx context.Context, from string, in messages.QuarantineRequest) (messages.QuarantineList, error) {
	return n.Quarantine(ctx, from, in)
}
func (n *Node) adminQuarantineRelease(ctx context.Context, from string, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	return n.QuarantineRelease(ctx, from, in)
}

// SetAside and ReleaseSetAside are the quarantine's listing and release
// as the HTTP API asks for them: the admin verbs' answers, with the
// members' statuses named by the API's sentinels.
func (n *Node) SetAside(ctx context.Context, node string) (messages.QuarantineList, error) {
	l, err := n.Quarantine(ctx, "", messages.QuarantineRequest{Node: node})
	return l, fromRemote(err)
}
func (n *Node) ReleaseSetAside(ctx context.Context, req messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	out, err := n.QuarantineRelease(ctx, "", req)
	return out, fromRemote(err)
}

// remoteKinds name a member's answer by its status. A timeout's outcome is
// unknown: unavailable, with the member's words saying to list again.
var remoteKinds = map[int]error{400: ErrInvalid, 404: ErrNotFound, transport.StatusUnavailable: ErrUnavailable,
	transport.StatusTimeout: ErrUnavailable}

// fromRemote is a member's refusal (a transport.RemoteError) as the
// node's sentinel with the member's reason; any other error as it is.
func fromRemote(err error) error {
	re, ok := errors.AsType[*transport.RemoteError](err)
	if !ok {
		return err
	}
	if kind, ok := remoteKinds[re.Status]; ok {
		return &errs.Refusal{Kind: kind, Reason: re.Msg}
	}
	return err
}

// writeHealth is the disk's verdict (actors/diskhealth) as the produce
// path reports each append's outcome to it.
type writeHealth struct{ *diskhealth.Health }

func (h writeHealth) failed(err error, _ *slog.Logger) { h.Failed(err) }
func (h writeHealth) succeeded(*slog.Logger)           { h.Succeeded() }

// newWriteHealth is the verdict of cfg's disk, whose ingress WAL is wal.
func newWriteHealth(cfg Config, wal *storage.WAL, log *slog.Logger) writeHealth {
	var noSpace func() bool
	if cfg.faults != nil {
		noSpace = cfg.faults.noSpace
	}
	return writeHealth{diskhealth.New(diskhealth.Deps{Dir: filepath.Join(cfg.DataDir, "wal"), WAL: wal, Logger: log,
		NoSpace: noSpace, Clock: cfg.steadyOrWall()})}
}

// WriteFailure is "" while the node's disk takes writes, else why not.
func (n *Node) WriteFailure() string { return n.writes.Failure() }

// appendWAL and appendWALMany append to the ingress WAL through the
// disk's verdict, which fails them as a full disk would on a test's word.
func (n *Node) appendWAL(ctx context.Context, wr storage.WALRecord) (uint64, error) {
	return n.writes.Append(ctx, wr)
}
func (n *Node) appendWALMany(ctx context.Context, wrs []storage.WALRecord) ([]uint64, []error) {
	return n.writes.AppendMany(ctx, wrs)
}

// withFaults is cfg with the debug switches in its storage configs and as
// its clock.
func withFaults(cfg Config, s *debugfaults.Switches) Config {
	cfg.Log.Faults, cfg.WAL.Faults, cfg.Consumer.Faults = s.Disk(), s.Disk(), s.Disk()
	cfg.clock = s.Clock()
	return cfg
}
