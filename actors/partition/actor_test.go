package partition

import (
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/messages"
)

// A commit that expires while it waits in the stash behind a write is
// refused unwritten, and the one stashed after it is still written.
func TestACommitThatExpiresInTheStashIsRefused(t *testing.T) {
	p := &Actor{deps: &Deps{}}
	now := time.Unix(100, 0)
	late := &messages.Commit{NotAfter: now.Add(-time.Second)}
	early := &messages.Commit{NotAfter: now.Add(time.Second)}
	none := &messages.Commit{}
	p.stash = []commitReq{{m: late}, {m: early}, {m: none}}
	p.deps.Metrics.CommitsExpired = metrics.NewSet().NewCounter(`narad_commits_expired_total{node="n1"}`)
	p.dropExpired(nil, now)
	if len(p.stash) != 2 || p.stash[0].m != early || p.stash[1].m != none {
		t.Fatalf("stash after dropping the expired: got %d commits, want the two in time, in order", len(p.stash))
	}
}
