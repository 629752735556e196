// Package startup is how a node gets into its cluster: the Raft replica
// id it joins with, kept in its data dir (replicaid.go), the join verb a
// joiner asks and a member answers (join.go), and a restart that is ready
// and registered through a ready peer instead of waiting for the shard
// leaders to reach it (peers.go). Start at the node's Start
// (actors/node.go), which calls these in order. It knows no Node: each
// type is built of what it needs, and the node builds one where it is
// used, since its NATS connection and metastore appear during the start.
package startup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// A joining node's Raft replica id comes from the cluster (the join verb
// allocates one never used, metastore.AllocateReplica) and is kept in its
// data dir, which its metastore binds to it: every later start reads it
// back instead of asking again. --replica-id (scripts) still names one,
// which the cluster refuses when it is taken or was removed.

// ReplicaIDFile holds the replica id in decimal, beside the metastore.
const ReplicaIDFile = "replica-id"

// Source is where a joiner's replica id came from; a refusal says
// what to do according to it.
type Source int

// Where a replica id came from.
const (
	FromCluster Source = iota // allocated by the join verb
	FromFlag                  // --replica-id
	FromDataDir               // ReplicaIDFile, from an earlier start
)

// remedy is what to tell the operator when the cluster refuses the id.
func (s Source) remedy() string {
	switch s {
	case FromFlag:
		return "start without --replica-id to get a fresh one"
	case FromDataDir:
		return "this data dir belongs to a node that left; start with an empty data dir (and without --replica-id) to join again"
	}
	return "start again to get a fresh one"
}

// ReadReplicaID reads the id an earlier start kept in dir; ok is false
// when there is none.
func ReadReplicaID(dir string) (id uint64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, ReplicaIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read replica id: %w", err)
	}
	id, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || id == 0 {
		return 0, false, fmt.Errorf("replica id file %s holds %q, want a positive integer: %w", filepath.Join(dir, ReplicaIDFile), b, errs.ErrInvalid)
	}
	return id, true, nil
}

// WriteReplicaID keeps id in dir durably: written to a temporary file,
// synced, renamed over the old one, and the directory synced, so a crash
// leaves either no file or the whole id.
func WriteReplicaID(dir string, id uint64) error {
	tmp := filepath.Join(dir, ReplicaIDFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write replica id: %w", err)
	}
	_, err = fmt.Fprintf(f, "%d\n", id)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ReplicaIDFile))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("write replica id: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// KeepFoundingReplicaID binds a founding node's data dir to its replica id
// (its position in --peers, or --replica-id): the first start keeps it,
// every later one must name the same. A node restarted on its data under
// another id (--peers listed in another order) would open Raft shards of
// its own as that id and answer for a replica it is not: a healthy member
// of the cluster then panicked in Raft ("inconsistent target") and the
// metadata lost its quorum (issue 30's nemesis, a harness that reordered
// --peers). Refused before the metastore opens, with what to do.
func KeepFoundingReplicaID(dir string, id uint64) error {
	stored, ok, err := ReadReplicaID(dir)
	switch {
	case err != nil:
		return err
	case ok && stored != id:
		return fmt.Errorf("data dir %s belongs to replica id %d, not %d: list --peers in the order the cluster was founded with (this node at position %d), or pass --replica-id %d: %w",
			dir, stored, id, stored, stored, errs.ErrInvalid)
	case ok:
		return nil
	}
	return WriteReplicaID(dir, id)
}

// ReplicaID settles a joining node's replica id before its metastore
// opens: the one its data dir holds, else the flag's (flag 0: none given),
// else one the cluster allocates, which is kept at once: the metastore
// about to open binds the data dir to it.
func (j Join) ReplicaID(ctx context.Context, flag uint64) (uint64, Source, error) {
	stored, ok, err := ReadReplicaID(j.DataDir)
	switch {
	case err != nil:
		return 0, 0, err
	case ok && flag != 0 && flag != stored:
		return 0, 0, fmt.Errorf("data dir %s belongs to replica id %d, not --replica-id %d: start without --replica-id: %w", j.DataDir, stored, flag, errs.ErrInvalid)
	case ok:
		return stored, FromDataDir, nil
	case flag != 0:
		return flag, FromFlag, nil
	}
	if j.NATS == nil && j.Dial != nil {
		// The metastore is not open yet; the node serves on this
		// connection once it is.
		if j.NATS, err = j.Dial(ctx); err != nil {
			return 0, 0, err
		}
	}
	rep, err := j.ask(ctx, messages.JoinRequest{NodeID: j.NodeID, RaftAddr: j.RaftAddr})
	if err != nil {
		return 0, 0, err
	}
	if rep.ReplicaID == 0 {
		return 0, 0, fmt.Errorf("join: the cluster allocated no replica id (a member too old to allocate one?): pass --replica-id: %w", errs.ErrInvalid)
	}
	if err := WriteReplicaID(j.DataDir, rep.ReplicaID); err != nil {
		return 0, 0, err
	}
	j.Log.Info("join: the cluster allocated this node's replica id", "replica", rep.ReplicaID)
	return rep.ReplicaID, FromCluster, nil
}

// allocateReplica answers a join request without a replica id.
func (j Join) allocateReplica(ctx context.Context, in messages.JoinRequest) (messages.JoinReply, error) {
	id, err := j.Store.AllocateReplicaID(ctx)
	if err != nil {
		return messages.JoinReply{}, transport.Errorf(transport.StatusTimeout, "allocate a replica id for %s: %v", in.NodeID, err)
	}
	j.Log.Info("allocated a replica id for a joining node", "joining", in.NodeID, "replica", id)
	return messages.JoinReply{ReplicaID: id}, nil
}

// refuseReplica says why a joiner may not use in.ReplicaID ("" when it
// may): the id was removed (Raft refuses it forever) or another member's.
// AddNonVoter refuses these too; this says it in words an operator can act on.
func (j Join) refuseReplica(ctx context.Context, in messages.JoinRequest) (string, error) {
	rm, err := j.Store.RaftMembership(ctx, metastore.MetaShard)
	if err != nil {
		return "", err
	}
	if rm.Removed[in.ReplicaID] {
		return fmt.Sprintf("replica id %d was used by a removed node and can never rejoin", in.ReplicaID), nil
	}
	for _, m := range j.Store.Members() {
		if m.ReplicaID == in.ReplicaID && m.ID != in.NodeID {
			return fmt.Sprintf("replica id %d is taken by member %s", in.ReplicaID, m.ID), nil
		}
	}
	return "", nil
}
