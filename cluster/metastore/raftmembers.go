package metastore

// Raft membership of the shards: adding a node as a non-voter, promoting it,
// removing a replica, moving leadership. Every shard has the same members,
// so each change applies to every shard, one after the other in Shards()
// order (metadata shard first). Each step reads the shard's membership
// first and skips a shard already in the wanted state, so a call that
// failed half-way is completed by calling it again.
//
// Who decides (the guards of rules D2 and D3, liveness, MinVoters) is the
// caller's business; these methods only check what Raft itself needs.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/lni/dragonboat/v4"

	"github.com/naradmq/narad/actors/clock"
)

// RaftMembership is one shard's Raft configuration, read linearizably.
type RaftMembership struct {
	Shard uint64
	// ConfigChangeID is the Raft index of the last applied membership change.
	ConfigChangeID uint64
	// Voters and NonVoters map replica id to Raft address.
	Voters    map[uint64]string
	NonVoters map[uint64]string
	// Removed holds every replica id ever removed from the shard: Raft
	// refuses them forever.
	Removed map[uint64]bool
}

// role reports how replicaID appears in m: "voter", "non-voter",
// "removed" or "" (unknown to the shard), and its address.
func (m RaftMembership) role(replicaID uint64) (role, addr string) {
	if a, ok := m.Voters[replicaID]; ok {
		return "voter", a
	}
	if a, ok := m.NonVoters[replicaID]; ok {
		return "non-voter", a
	}
	if m.Removed[replicaID] {
		return "removed", ""
	}
	return "", ""
}

// holderOf returns the replica id that uses addr as a voter or non-voter.
func (m RaftMembership) holderOf(addr string) (uint64, bool) {
	for _, ms := range []map[uint64]string{m.Voters, m.NonVoters} {
		for id, a := range ms {
			if a == addr {
				return id, true
			}
		}
	}
	return 0, false
}

// RaftMembership reads shard's Raft configuration through the leader (a
// ReadIndex): it reflects every membership change completed before the
// call. ErrInvalid for an unknown shard, ErrUnavailable without a leader.
func (s *Store) RaftMembership(ctx context.Context, shard uint64) (RaftMembership, error) {
	if err := s.checkShard(shard); err != nil {
		return RaftMembership{}, err
	}
	m, err := s.raftMembership(ctx, shard)
	if err != nil {
		return RaftMembership{}, fmt.Errorf("metastore: raft membership of shard %d: %w", shard, err)
	}
	return m, nil
}

func (s *Store) raftMembership(ctx context.Context, shard uint64) (RaftMembership, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ProposalTimeout)
	defer cancel()
	b := s.newBackoff()
	for {
		m, err := s.nh.SyncGetShardMembership(rctx, shard)
		if err == nil {
			out := RaftMembership{
				Shard:          shard,
				ConfigChangeID: m.ConfigChangeID,
				Voters:         maps.Clone(m.Nodes),
				NonVoters:      maps.Clone(m.NonVotings),
				Removed:        make(map[uint64]bool, len(m.Removed)),
			}
			if out.Voters == nil {
				out.Voters = map[uint64]string{}
			}
			if out.NonVoters == nil {
				out.NonVoters = map[uint64]string{}
			}
			for id := range m.Removed {
				out.Removed[id] = true
			}
			return out, nil
		}
		if notAppended(err) && b.wait(rctx, s.tick()) == nil {
			continue
		}
		return RaftMembership{}, s.classify(ctx, err)
	}
}

// AddNonVoter adds replicaID at raftAddr to every shard as a non-voting
// replica: what the cluster does when a new node asks to join (after it,
// that node opens with Config.Join). A non-voter receives every entry and
// serves local and leader reads, and its proposals are forwarded to the
// leader, but it neither votes nor counts towards a quorum. Idempotent: a
// shard where replicaID is already a non-voter or a voter at raftAddr is
// skipped. ErrRefused when replicaID was removed before (a removed id is
// never accepted again: give the node a fresh one), when it is a member at
// another address, or when another replica holds raftAddr.
func (s *Store) AddNonVoter(ctx context.Context, replicaID uint64, raftAddr string) error {
	return s.changeReplicaAt(ctx, "add non-voter", replicaID, raftAddr, func(m RaftMembership, role, addr string) (bool, error) {
		switch {
		case role == "removed":
			return false, fmt.Errorf("replica %d was removed and can never rejoin: %w", replicaID, ErrRefused)
		case role != "" && addr != raftAddr:
			return false, fmt.Errorf("replica %d is a %s at %s: %w", replicaID, role, addr, ErrRefused)
		case role != "":
			return true, nil
		}
		if other, ok := m.holderOf(raftAddr); ok {
			return false, fmt.Errorf("replica %d already uses %s: %w", other, raftAddr, ErrRefused)
		}
		return false, nil
	}, func(rctx context.Context, shard uint64) error {
		return s.nh.SyncRequestAddNonVoting(rctx, shard, replicaID, raftAddr, 0)
	})
}

// PromoteToVoter makes the non-voter replicaID at raftAddr a voter of every
// shard (Dragonboat: adding it as a regular replica with the same id and
// address keeps its log progress). A shard where it already is a voter at
// raftAddr is skipped; ErrRefused when it is not a non-voter there (never
// added, removed, or at another address). Promote a non-voter that has
// caught up (WaitReady on its node): a lagging voter slows every commit.
func (s *Store) PromoteToVoter(ctx context.Context, replicaID uint64, raftAddr string) error {
	return s.changeReplicaAt(ctx, "promote", replicaID, raftAddr, func(_ RaftMembership, role, addr string) (bool, error) {
		switch {
		case role == "voter" && addr == raftAddr:
			return true, nil
		case role == "non-voter" && addr == raftAddr:
			return false, nil
		case role == "":
			return false, fmt.Errorf("replica %d is not a member, want a non-voter: %w", replicaID, ErrRefused)
		default:
			return false, fmt.Errorf("replica %d is %s %s, want a non-voter at %s: %w", replicaID, role, addr, raftAddr, ErrRefused)
		}
	}, func(rctx context.Context, shard uint64) error {
		return s.nh.SyncRequestAddReplica(rctx, shard, replicaID, raftAddr, 0)
	})
}

// RemoveReplica removes replicaID, voter or non-voter, from every shard;
// its replicas stop once they apply their removal. The id can never be used
// again in this cluster: a node that comes back needs a fresh replica id
// and an empty directory. A shard that lists it as removed or not at all
// is skipped. Where replicaID leads a shard, leadership is first moved to
// another voter (rule D2), best effort: Raft makes a removed leader step
// down anyway, at the cost of an election. ErrInvalid when replicaID is
// this Store's own (ask another member), ErrRefused when it is a shard's
// only voter. The guards of rules D2 and D3 are the caller's.
func (s *Store) RemoveReplica(ctx context.Context, replicaID uint64) error {
	if replicaID == 0 || replicaID == s.cfg.ReplicaID {
		return fmt.Errorf("metastore: remove replica %d from replica %d: a member removes another: %w", replicaID, s.cfg.ReplicaID, ErrInvalid)
	}
	op := fmt.Sprintf("remove replica %d", replicaID)
	for _, shard := range s.Shards() {
		s.moveLeaderOff(ctx, shard, replicaID)
		err := s.changeShard(ctx, shard, func(m RaftMembership) (bool, error) {
			role, _ := m.role(replicaID)
			switch {
			case role == "" || role == "removed":
				return true, nil
			case role == "voter" && len(m.Voters) == 1:
				return false, fmt.Errorf("replica %d is the only voter: %w", replicaID, ErrRefused)
			}
			return false, nil
		}, func(rctx context.Context, shard uint64) error {
			return s.nh.SyncRequestDeleteReplica(rctx, shard, replicaID, 0)
		})
		if err != nil {
			return fmt.Errorf("metastore: %s on shard %d: %w", op, shard, err)
		}
	}
	s.log.Info("raft membership changed", "op", op)
	return nil
}

// moveLeaderOff moves the leadership of shard to another voter if replica
// leads it, best effort (RemoveReplica): to this replica when it is a voter
// (it is certainly alive), else to the voter pickVoter chooses.
func (s *Store) moveLeaderOff(ctx context.Context, shard, replica uint64) {
	if leader, _, ok, err := s.nh.GetLeaderID(shard); err != nil || !ok || leader != replica {
		return
	}
	m, err := s.raftMembership(ctx, shard)
	if err != nil {
		return
	}
	to, ok := s.cfg.ReplicaID, true
	if _, voter := m.Voters[to]; !voter {
		to, ok = s.pickVoter(m, replica, 0)
	}
	if ok {
		if err := s.TransferLeadership(ctx, shard, to); err != nil {
			s.log.Warn("leadership not moved before removal", "shard", shard, "replica", replica, "to", to, "err", err)
		}
	}
}

// changeReplicaAt runs a change of replicaID at raftAddr on every shard
// (changeEveryShard); both are needed, since Raft keys a replica by id and
// reaches it by address. what names the change in errors and the log
// ("add non-voter 4 at 10.0.0.4:7950"), and decide gets the replica's role
// and address in each shard's membership (RaftMembership.role).
func (s *Store) changeReplicaAt(ctx context.Context, what string, replicaID uint64, raftAddr string,
	decide func(m RaftMembership, role, addr string) (done bool, err error),
	request func(context.Context, uint64) error) error {
	if replicaID == 0 || raftAddr == "" {
		return fmt.Errorf("metastore: %s %d at %q: %w", what, replicaID, raftAddr, ErrInvalid)
	}
	op := fmt.Sprintf("%s %d at %s", what, replicaID, raftAddr)
	return s.changeEveryShard(ctx, op, func(m RaftMembership) (bool, error) {
		role, addr := m.role(replicaID)
		return decide(m, role, addr)
	}, request)
}

// changeEveryShard runs one membership change on every shard in order.
// For each shard, decide reads the membership: done skips the shard, an
// error stops everything (it must wrap a sentinel). Otherwise request
// proposes the change, and the loop reads the membership again: a change
// that was dropped, rejected (another change was pending) or timed out is
// retried until the shard is done or ProposalTimeout ends (ErrUnavailable).
func (s *Store) changeEveryShard(ctx context.Context, op string,
	decide func(RaftMembership) (done bool, err error),
	request func(context.Context, uint64) error) error {
	for _, shard := range s.Shards() {
		if err := s.changeShard(ctx, shard, decide, request); err != nil {
			return fmt.Errorf("metastore: %s on shard %d: %w", op, shard, err)
		}
	}
	s.log.Info("raft membership changed", "op", op)
	return nil
}

func (s *Store) changeShard(ctx context.Context, shard uint64,
	decide func(RaftMembership) (bool, error),
	request func(context.Context, uint64) error) error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ProposalTimeout)
	defer cancel()
	b := s.newBackoff()
	var lastErr error
	for {
		m, err := s.raftMembership(cctx, shard)
		if err != nil {
			return joinLast(err, lastErr)
		}
		done, err := decide(m)
		if err != nil || done {
			return err
		}
		err = request(cctx, shard)
		if err == nil {
			return nil
		}
		if !retryableChange(err) {
			return s.classify(ctx, err)
		}
		lastErr = err
		if werr := b.wait(cctx, s.tick()); werr != nil {
			return fmt.Errorf("%w: %w (last: %v)", ErrUnavailable, werr, err)
		}
	}
}

// retryableChange reports Dragonboat errors after which a membership
// change may simply be read back and tried again.
func retryableChange(err error) bool {
	return notAppended(err) ||
		errors.Is(err, dragonboat.ErrRejected) ||
		errors.Is(err, dragonboat.ErrTimeout) ||
		errors.Is(err, dragonboat.ErrAborted)
}

func joinLast(err, last error) error {
	if last == nil {
		return err
	}
	return fmt.Errorf("%w (last: %v)", err, last)
}

// TransferLeadership moves the leadership of shard to the voter toReplica
// and returns once this replica sees toReplica lead. Call it on a voter
// (a non-voter cannot forward the request: ErrInvalid); the leader waits
// for the target to catch up, and proposals made meanwhile are retried by
// the Store. ErrRefused when toReplica is not a voter of shard;
// ErrUnavailable when the transfer did not happen within ProposalTimeout.
func (s *Store) TransferLeadership(ctx context.Context, shard uint64, toReplica uint64) error {
	if err := s.checkShard(shard); err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.ProposalTimeout)
	defer cancel()
	m, err := s.raftMembership(tctx, shard)
	if err != nil {
		return fmt.Errorf("metastore: transfer leadership of shard %d to %d: %w", shard, toReplica, err)
	}
	if _, ok := m.Voters[toReplica]; !ok {
		return fmt.Errorf("metastore: transfer leadership of shard %d to %d: not a voter: %w", shard, toReplica, ErrRefused)
	}
	if _, ok := m.Voters[s.cfg.ReplicaID]; !ok {
		return fmt.Errorf("metastore: transfer leadership of shard %d to %d: replica %d is not a voter, ask one: %w", shard, toReplica, s.cfg.ReplicaID, ErrInvalid)
	}
	// Ask again every tick until it happened. Dragonboat's leader ignores
	// requests while a transfer is under way, and gives one up after an
	// election timeout; the target refuses to campaign while it has a
	// committed entry it has not applied yet, which under a steady write
	// load is often the case when its TimeoutNow arrives. Right after an
	// abandoned attempt the log is quiet (the leader drops proposals while
	// transferring), so a request made then usually succeeds.
	t := clock.NewTicker(s.clock, s.tick())
	defer t.Stop()
	var (
		lastErr error
		leader  uint64
	)
	for {
		id, _, ok, err := s.nh.GetLeaderID(shard)
		if err != nil {
			return fmt.Errorf("metastore: transfer leadership of shard %d to %d: %w", shard, toReplica, s.classify(ctx, err))
		}
		leader = id
		if ok && leader == toReplica {
			s.log.Info("raft leadership moved", "shard", shard, "to", toReplica)
			return nil
		}
		if ok {
			if err := s.nh.RequestLeaderTransfer(shard, toReplica); err != nil && !dragonboat.IsTempError(err) {
				return fmt.Errorf("metastore: transfer leadership of shard %d to %d: %w", shard, toReplica, s.classify(ctx, err))
			} else if err != nil {
				lastErr = err
			}
		}
		select {
		case <-t.C:
		case <-tctx.Done():
			return fmt.Errorf("metastore: transfer leadership of shard %d to %d: %w: %w (leader %d, last: %v)",
				shard, toReplica, ErrUnavailable, tctx.Err(), leader, lastErr)
		}
	}
}

// TransferAllLeadership moves the leadership of every shard led by away
// (as this replica sees it) to another voter, spreading the shards over the
// other voters; a draining leader calls it before its removal (rule D2).
// A transfer that fails is tried with the next voter; the error joins the
// shards that could not be moved.
func (s *Store) TransferAllLeadership(ctx context.Context, away uint64) error {
	var errs []error
	for i, shard := range s.Shards() {
		leader, _, ok, err := s.nh.GetLeaderID(shard)
		if err != nil {
			errs = append(errs, fmt.Errorf("metastore: leader of shard %d: %w", shard, s.classify(ctx, err)))
			continue
		}
		if !ok || leader != away {
			continue
		}
		m, err := s.raftMembership(ctx, shard)
		if err != nil {
			errs = append(errs, fmt.Errorf("metastore: move leadership of shard %d off %d: %w", shard, away, err))
			continue
		}
		var moved bool
		var last error
		for attempt := range max(len(m.Voters)-1, 0) {
			to, ok := s.pickVoter(m, away, i+attempt)
			if !ok {
				break
			}
			if last = s.TransferLeadership(ctx, shard, to); last == nil {
				moved = true
				break
			}
			if ctx.Err() != nil {
				break
			}
		}
		if !moved {
			if last == nil {
				last = fmt.Errorf("metastore: move leadership of shard %d off %d: no other voter: %w", shard, away, ErrRefused)
			}
			errs = append(errs, last)
		}
	}
	return errors.Join(errs...)
}

// pickVoter returns the n-th (modulo) voter of m other than not, by id.
func (s *Store) pickVoter(m RaftMembership, not uint64, n int) (uint64, bool) {
	var ids []uint64
	for _, id := range slices.Sorted(maps.Keys(m.Voters)) {
		if id != not {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, false
	}
	return ids[n%len(ids)], true
}

// LeaderOf returns, as this replica knows it, the leader of shard and the
// Raft term it leads in (for metrics: this replica leads where replicaID
// is ReplicaID()). ok is false while no leader is known, for an unknown
// shard, and after Close.
func (s *Store) LeaderOf(shard uint64) (replicaID uint64, term uint64, ok bool) {
	id, term, ok, err := s.nh.GetLeaderID(shard)
	if err != nil || !ok {
		return 0, 0, false
	}
	return id, term, true
}

// RaftRole returns this replica's role in shard from its local view:
// "leader", "follower" (a voter), "non-voter", or "" for an unknown shard,
// a replica still loading, or after Close. For metrics; decisions use RaftMembership.
func (s *Store) RaftRole(shard uint64) string {
	info := s.nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true})
	if info == nil {
		return ""
	}
	for _, si := range info.ShardInfoList {
		if si.ShardID != shard {
			continue
		}
		switch {
		case si.Pending:
			return ""
		case si.IsNonVoting:
			return "non-voter"
		case si.LeaderID == s.cfg.ReplicaID:
			return "leader"
		default:
			return "follower"
		}
	}
	return ""
}

func (s *Store) checkShard(shard uint64) error {
	if shard < MetaShard || shard >= firstAssignmentShard+uint64(s.cfg.AssignmentShards) {
		return fmt.Errorf("metastore: shard %d: not one of 1..%d: %w", shard, s.cfg.AssignmentShards+1, ErrInvalid)
	}
	return nil
}
