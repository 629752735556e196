package admin

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// cluster is a node's cluster verbs that answer what they are told.
type cluster struct {
	verdict api.DecommissionVerdict
	forget  api.ForgetVerdict
	err     error
	abort   api.AbortOutcome
}

func (c cluster) Members(context.Context) []messages.MemberInfo { return nil }
func (c cluster) ClusterVersion(context.Context) (messages.ClusterVersionInfo, error) {
	return messages.ClusterVersionInfo{}, nil
}
func (c cluster) FinalizeClusterVersion(context.Context, int) (messages.ClusterVersionInfo, error) {
	return messages.ClusterVersionInfo{}, nil
}
func (c cluster) Moves(context.Context, bool) messages.MoveList { return messages.MoveList{} }
func (c cluster) AbortMove(context.Context, string, int, string) api.AbortOutcome {
	return c.abort
}
func (c cluster) Decommission(context.Context, string, bool) (api.DecommissionVerdict, error) {
	return c.verdict, c.err
}
func (c cluster) CancelDecommission(context.Context, string) error { return c.err }
func (c cluster) Forget(context.Context, string, bool, bool) (api.ForgetVerdict, error) {
	return c.forget, c.err
}

// statusOf is the transport status err carries, 0 for none.
func statusOf(err error) int {
	if re, ok := errors.AsType[*transport.RemoteError](err); ok {
		return re.Status
	}
	if err != nil {
		return -1
	}
	return 0
}

// The decommission and abort verbs answer each outcome with the status
// `narad cluster` words it by.
func TestVerbsAnswerEachOutcomeWithItsStatus(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		what string
		node cluster
		in   messages.DecommissionRequest
		want int
	}{
		{"started", cluster{}, messages.DecommissionRequest{ID: "n2"}, 0},
		{"refused", cluster{verdict: api.DecommissionVerdict{Refusal: "last voter"}}, messages.DecommissionRequest{ID: "n2"}, 409},
		{"refused, dry run", cluster{verdict: api.DecommissionVerdict{Refusal: "last voter"}}, messages.DecommissionRequest{ID: "n2", DryRun: true}, 0},
		{"no such member", cluster{err: fmt.Errorf("member: %w", errs.ErrNotFound)}, messages.DecommissionRequest{ID: "n9"}, 404},
		{"no controller", cluster{err: errs.ErrUnavailable}, messages.DecommissionRequest{ID: "n2"}, transport.StatusUnavailable},
		{"cancelled", cluster{}, messages.DecommissionRequest{ID: "n2", Cancel: true}, 0},
		{"cancel of no such member", cluster{err: errs.ErrNotFound}, messages.DecommissionRequest{ID: "n9", Cancel: true}, 404},
	} {
		_, err := Verbs{Nodes: c.node}.decommission(ctx, "", c.in)
		if got := statusOf(err); got != c.want {
			t.Errorf("decommission %s: got status %d (%v), want %d", c.what, got, err, c.want)
		}
	}
	for _, r := range []api.AbortResult{api.Aborted, api.AbortNoMove, api.AbortRefused, api.AbortNotFound, api.AbortUnknown} {
		want := api.AbortStatus(r)
		if r == api.Aborted {
			want = 0
		}
		out, err := Verbs{Nodes: cluster{abort: api.AbortOutcome{Result: r}}}.abortMove(ctx, "", messages.AbortMoveRequest{Topic: "t"})
		if got := statusOf(err); got != want || out.Result != string(r) {
			t.Errorf("abort %s: got status %d, result %q; want %d, %q", r, got, out.Result, want, r)
		}
	}
}
