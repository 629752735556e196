package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/naradmq/narad/bench/proc"
)

// handoffEnv is the variable that turns the shutdown hand-off off (0s); the
// "on" variant removes it from the environment so the node's default holds,
// or sets it to -handoff-timeout.
const handoffEnv = "NARAD_SHUTDOWN_HANDOFF_TIMEOUT"

// cluster is NATS and the nodes of one scenario, all under its dir: the
// processes of bench/proc, with the scenario's hand-off variant.
type cluster struct {
	*proc.Cluster
	handoff bool // false: the nodes get NARAD_SHUTDOWN_HANDOFF_TIMEOUT=0s
	// handoffTimeout, when handoff and above 0, is the nodes' hand-off
	// timeout instead of their default.
	handoffTimeout time.Duration
}

// newCluster picks the ports of NATS and of nodes node ids n1..nN (the
// first voters of them start with --peers, any further one joins).
func newCluster(bin, dir string, voters, total int, handoff bool, handoffTimeout, rssPoll time.Duration) (*cluster, error) {
	pc, err := proc.New(bin, dir, voters, total)
	if err != nil {
		return nil, err
	}
	c := &cluster{Cluster: pc, handoff: handoff, handoffTimeout: handoffTimeout}
	pc.RSSPoll = rssPoll
	pc.Env = c.nodeEnv()
	return c, nil
}

// nodeEnv is this program's environment with the hand-off variable set for
// the variant: for "on" removed (so the default holds) or the
// -handoff-timeout, 0s for "off". The caller's own value never reaches the
// nodes: each variant is what its name says.
func (c *cluster) nodeEnv() []string {
	// The first metadata leader seeds admin with it (CONTRACT.md §2.1).
	env := proc.Environ([]string{handoffEnv, "NARAD_ADMIN_PASSWORD"}, "NARAD_ADMIN_PASSWORD="+benchPassword)
	switch {
	case !c.handoff:
		env = append(env, handoffEnv+"=0s")
	case c.handoffTimeout > 0:
		env = append(env, handoffEnv+"="+c.handoffTimeout.String())
	}
	return env
}

// waitAdmin waits until admin can log in: the metadata leader seeds it in
// the background after its election, so /readyz can answer 200 first.
func (c *cluster) waitAdmin(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var users []json.RawMessage
		err := getJSON(ctx, c.Nodes[0].URL(), "/v1/users", &users)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("admin cannot log in: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
