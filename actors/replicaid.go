package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// A joining node's Raft replica id comes from the cluster (the join verb
// allocates one never used, metastore.AllocateReplica) and is kept in its
// data dir, which its metastore binds to it: every later start reads it
// back instead of asking again. --replica-id (scripts) still names one,
// which the cluster refuses when it is taken or was removed.

// replicaIDFile holds the replica id in decimal, beside the metastore.
const replicaIDFile = "replica-id"

// replicaSource is where a joiner's replica id came from; a refusal says
// what to do according to it.
type replicaSource int

const (
	fromCluster replicaSource = iota // allocated by the join verb
	fromFlag                         // --replica-id
	fromDataDir                      // replicaIDFile, from an earlier start
)

// remedy is what to tell the operator when the cluster refuses the id.
func (s replicaSource) remedy() string {
	switch s {
	case fromFlag:
		return "start without --replica-id to get a fresh one"
	case fromDataDir:
		return "this data dir belongs to a node that left; start with an empty data dir (and without --replica-id) to join again"
	}
	return "start again to get a fresh one"
}

// readReplicaID reads the id an earlier start kept in dir; ok is false
// when there is none.
func readReplicaID(dir string) (id uint64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, replicaIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read replica id: %w", err)
	}
	id, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || id == 0 {
		return 0, false, fmt.Errorf("replica id file %s holds %q, want a positive integer: %w", filepath.Join(dir, replicaIDFile), b, ErrInvalid)
	}
	return id, true, nil
}

// writeReplicaID keeps id in dir durably: written to a temporary file,
// synced, renamed over the old one, and the directory synced, so a crash
// leaves either no file or the whole id.
func writeReplicaID(dir string, id uint64) error {
	tmp := filepath.Join(dir, replicaIDFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write replica id: %w", err)
	}
	_, err = fmt.Fprintf(f, "%d\n", id)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, replicaIDFile))
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

// keepFoundingReplicaID binds a founding node's data dir to its replica id
// (its position in --peers, or --replica-id): the first start keeps it,
// every later one must name the same. A node restarted on its data under
// another id (--peers listed in another order) would open Raft shards of
// its own as that id and answer for a replica it is not: a healthy member
// of the cluster then panicked in Raft ("inconsistent target") and the
// metadata lost its quorum (issue 30's nemesis, a harness that reordered
// --peers). Refused before the metastore opens, with what to do.
func keepFoundingReplicaID(dir string, id uint64) error {
	stored, ok, err := readReplicaID(dir)
	switch {
	case err != nil:
		return err
	case ok && stored != id:
		return fmt.Errorf("data dir %s belongs to replica id %d, not %d: list --peers in the order the cluster was founded with (this node at position %d), or pass --replica-id %d: %w",
			dir, stored, id, stored, stored, ErrInvalid)
	case ok:
		return nil
	}
	return writeReplicaID(dir, id)
}

// joinerReplicaID settles a joining node's replica id before its metastore
// opens: the one its data dir holds, else the flag's (flag 0: none given),
// else one the cluster allocates, which is kept at once: the metastore
// about to open binds the data dir to it.
func (n *Node) joinerReplicaID(ctx context.Context, flag uint64) (uint64, replicaSource, error) {
	stored, ok, err := readReplicaID(n.cfg.DataDir)
	switch {
	case err != nil:
		return 0, 0, err
	case ok && flag != 0 && flag != stored:
		return 0, 0, fmt.Errorf("data dir %s belongs to replica id %d, not --replica-id %d: start without --replica-id: %w", n.cfg.DataDir, stored, flag, ErrInvalid)
	case ok:
		return stored, fromDataDir, nil
	case flag != 0:
		return flag, fromFlag, nil
	}
	if n.nats == nil && n.cfg.NATSURL != "" {
		// The metastore is not open yet; connectNATS serves on this
		// connection once it is.
		if err := n.dialNATS(ctx); err != nil {
			return 0, 0, err
		}
	}
	rep, err := n.askJoin(ctx, messages.JoinRequest{NodeID: n.cfg.NodeID, RaftAddr: n.raftAddr})
	if err != nil {
		return 0, 0, err
	}
	if rep.ReplicaID == 0 {
		return 0, 0, fmt.Errorf("join: the cluster allocated no replica id (a member too old to allocate one?): pass --replica-id: %w", ErrInvalid)
	}
	if err := writeReplicaID(n.cfg.DataDir, rep.ReplicaID); err != nil {
		return 0, 0, err
	}
	n.log.Info("join: the cluster allocated this node's replica id", "replica", rep.ReplicaID)
	return rep.ReplicaID, fromCluster, nil
}

// allocateReplica answers a join request without a replica id.
func (n *Node) allocateReplica(ctx context.Context, in messages.JoinRequest) (messages.JoinReply, error) {
	id, err := n.store.AllocateReplicaID(ctx)
	if err != nil {
		return messages.JoinReply{}, transport.Errorf(transport.StatusTimeout, "allocate a replica id for %s: %v", in.NodeID, err)
	}
	n.log.Info("allocated a replica id for a joining node", "joining", in.NodeID, "replica", id)
	return messages.JoinReply{ReplicaID: id}, nil
}

// refuseReplica says why a joiner may not use in.ReplicaID ("" when it
// may): the id was removed (Raft refuses it forever) or another member's.
// AddNonVoter refuses these too; this says it in words an operator can act on.
func (n *Node) refuseReplica(ctx context.Context, in messages.JoinRequest) (string, error) {
	rm, err := n.store.RaftMembership(ctx, metastore.MetaShard)
	if err != nil {
		return "", err
	}
	if rm.Removed[in.ReplicaID] {
		return fmt.Sprintf("replica id %d was used by a removed node and can never rejoin", in.ReplicaID), nil
	}
	for _, m := range n.store.Members() {
		if m.ReplicaID == in.ReplicaID && m.ID != in.NodeID {
			return fmt.Sprintf("replica id %d is taken by member %s", in.ReplicaID, m.ID), nil
		}
	}
	return "", nil
}
