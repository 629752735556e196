package clusterview

import (
	"context"
	"errors"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// ClusterVersion lists the cluster version and what each member reads, from
// the metadata leader (a finalize is judged on the leader's members, so the
// listing that precedes it is too).
func (v *View) ClusterVersion(ctx context.Context) (messages.ClusterVersionInfo, error) {
	members, err := v.d.Replica.LeaderMembers(ctx)
	if err != nil {
		return messages.ClusterVersionInfo{}, errs.FromMetastore(err)
	}
	out := messages.ClusterVersionInfo{Version: v.d.Replica.ClusterVersion(), Newest: messages.ClusterVersionNewest,
		Members: []messages.MemberVersion{}}
	out.Finalizable = messages.ClusterVersionNewest
	for _, m := range members {
		out.Members = append(out.Members, messages.MemberVersion{ID: m.ID, Reads: m.Reads})
		out.Finalizable = min(out.Finalizable, m.Reads)
	}
	return out, nil
}

// FinalizeClusterVersion moves the cluster version up to version: a
// conflict, with the metastore's reason, while a member does not read it
// or when the cluster is there already. It answers the listing after.
func (v *View) FinalizeClusterVersion(ctx context.Context, version int) (messages.ClusterVersionInfo, error) {
	err := v.d.Replica.SetClusterVersion(ctx, version)
	if errors.Is(err, metastore.ErrRefused) {
		return messages.ClusterVersionInfo{}, &errs.Refusal{Kind: errs.ErrConflict, Reason: err.Error()}
	}
	if err != nil {
		return messages.ClusterVersionInfo{}, errs.FromMetastore(err)
	}
	return v.ClusterVersion(ctx)
}
