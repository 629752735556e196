package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/naradmq/narad/bench/proc"
	"github.com/naradmq/narad/messages"
)

// metaShard is the metadata shard's Raft id (cluster/metastore.MetaShard),
// as the nodes label narad_raft_leader with it.
const metaShard = "1"

// errNoLeader is a moment where not exactly one node claims the metadata
// shard's leadership: an election, or a stale claim beside a new one.
var errNoLeader = errors.New("no single metadata leader")

// adminTimeout bounds one request of the nemesis to a node.
const adminTimeout = 2 * time.Second

// maxMetricsBytes bounds a /metrics read: a few hundred series.
const maxMetricsBytes = 4 << 20

var adminClient = &http.Client{Timeout: adminTimeout}

// metaLeader is the index of the one running node whose /metrics says it
// leads the metadata shard; errNoLeader when none or several do.
func metaLeader(ctx context.Context, nodes []*proc.Node) (int, error) {
	leader, claims := -1, 0
	for i, n := range nodes {
		if !n.Proc.Running() {
			continue
		}
		body, err := get(ctx, n.URL()+"/metrics", maxMetricsBytes)
		if err != nil {
			continue
		}
		if leadsMeta(body, n.ID) {
			leader, claims = i, claims+1
		}
	}
	if claims != 1 {
		return 0, fmt.Errorf("%d nodes claim it: %w", claims, errNoLeader)
	}
	return leader, nil
}

// leadsMeta reports whether a node's /metrics text says node id leads the
// metadata shard.
func leadsMeta(metrics, id string) bool {
	want := fmt.Sprintf(`narad_raft_leader{node=%q,shard=%q} `, id, metaShard)
	s := bufio.NewScanner(strings.NewReader(metrics))
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), want); ok {
			return strings.TrimSpace(v) == "1"
		}
	}
	return false
}

// get reads url's 200 body, at most limit bytes.
func get(ctx context.Context, url string, limit int64) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %.200s", url, resp.StatusCode, raw)
	}
	return string(raw), nil
}

// decommission decommissions node idx through another node's admin API,
// waits until it left the members and exited, and after f.Hold starts a
// fresh node in its slot (proc.Cluster.Replace) and waits until it is
// ready and the moves onto it settled.
func (n *nemesis) decommission(ctx context.Context, f Fault, idx int, r *ran) error {
	old := n.c.Nodes[idx]
	peer := n.c.Nodes[(idx+1)%len(n.c.Nodes)]
	if err := n.admin(ctx, http.MethodPost, peer.URL()+"/v1/cluster/members/"+old.ID+"/decommission"); err != nil {
		return fmt.Errorf("decommission %s: %w", old.ID, err)
	}
	err := proc.Poll(ctx, n.cfg.settleTimeout, 200*time.Millisecond, nil, func() bool {
		ms, err := n.members(ctx, peer)
		if err != nil {
			return false
		}
		_, present := ms[old.ID]
		return !present
	})
	if err != nil {
		return fmt.Errorf("%s leaving the members after its decommission: %w: %w", old.ID, errNodeLost, err)
	}
	left := time.Since(n.start)
	n.logf("%s left the members %s after its decommission", old.ID, seconds(left-r.Fired))
	// A node that left may exit by itself; one that did not is stopped,
	// its leaving done.
	if old.Proc.Running() {
		if _, err := n.c.Stop(ctx, old, n.cfg.stopTimeout); err != nil && !errors.Is(err, proc.ErrTimeout) {
			return err
		}
	}
	r.Exit = time.Since(n.start) - r.Fired
	if !sleep(ctx, f.Hold) {
		return ctx.Err()
	}
	fresh, err := n.c.Replace(idx)
	if err != nil {
		return err
	}
	r.Note = "replaced by " + fresh.ID
	if err := n.c.StartNode(fresh); err != nil {
		return err
	}
	if err := n.waitReady(ctx, fresh); err != nil {
		return fmt.Errorf("%s after %s's decommission: %w: %w", fresh.ID, old.ID, errNodeLost, err)
	}
	err = proc.Poll(ctx, n.cfg.settleTimeout, 200*time.Millisecond, fresh.Proc, func() bool {
		ms, err := n.members(ctx, peer)
		if err != nil || ms[fresh.ID].OwnedPartitions == 0 {
			return false
		}
		var l messages.MoveList
		return n.getJSON(ctx, peer.URL()+"/v1/cluster/moves", &l) == nil && len(l.Moves) == 0
	})
	if err != nil {
		return fmt.Errorf("moves onto %s settling: %w: %w", fresh.ID, errNodeLost, err)
	}
	n.logf("%s joined in %s's place and owns partitions, no move in flight", fresh.ID, old.ID)
	return nil
}

// members reads GET /v1/cluster/members of node at, by id.
func (n *nemesis) members(ctx context.Context, at *proc.Node) (map[string]messages.MemberInfo, error) {
	var l messages.MemberList
	if err := n.getJSON(ctx, at.URL()+"/v1/cluster/members", &l); err != nil {
		return nil, err
	}
	out := make(map[string]messages.MemberInfo, len(l.Members))
	for _, m := range l.Members {
		out[m.ID] = m
	}
	return out, nil
}

// maxAdminBytes bounds an admin answer read: a members or moves list.
const maxAdminBytes = 1 << 20

// getJSON GETs url as admin and decodes its 200 answer into v.
func (n *nemesis) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth("admin", n.cfg.password)
	resp, err := adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %.200s", url, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, v)
}

// admin sends a bodiless admin request (a verb) until a node answers 204,
// retrying a 503 (no leader reachable) or no answer, within
// -settle-timeout.
func (n *nemesis) admin(ctx context.Context, method, url string) error {
	var last error
	err := proc.Poll(ctx, n.cfg.settleTimeout, 500*time.Millisecond, nil, func() bool {
		last = n.send(ctx, method, url, nil)
		return last == nil || errors.Is(last, errRefused)
	})
	if err != nil {
		return fmt.Errorf("%w (%v)", err, last)
	}
	return last
}

// errRefused is an admin request a node refused for good (a 4xx).
var errRefused = errors.New("refused")

// send sends one admin request with a JSON body (nil for none) and wants
// 204, or 200 (whose answer it drops); a 4xx is errRefused.
func (n *nemesis) send(ctx context.Context, method, url string, body any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth("admin", n.cfg.password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAdminBytes))
	switch {
	case resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return fmt.Errorf("%s %s: %d %.200s: %w", method, url, resp.StatusCode, raw, errRefused)
	}
	return fmt.Errorf("%s %s: %d %.200s", method, url, resp.StatusCode, raw)
}

// diskFault and clockFault are the bodies of narad serve's --debug-faults
// routes.
type diskFault struct {
	Fail string `json:"fail"`
}

type clockFault struct {
	StepMs int64 `json:"step_ms"`
}

// faultState is GET /debug/faults.
type faultState struct {
	Disk          string `json:"disk"`
	ClockOffsetMs int64  `json:"clock_offset_ms"`
}

// failOff turns a disk fault off.
const failOff = "off"

// debugFault throws a Disk or a Clock at node idx through its
// /debug/faults routes, undoes it after f.Hold, and waits for the node's
// /readyz; a node that exited on its disk errors is started again on its
// data, which the fault's note says.
func (n *nemesis) debugFault(ctx context.Context, f Fault, idx int, r *ran) error {
	node := n.c.Nodes[idx]
	route, on, off := node.URL()+"/debug/faults/disk", any(diskFault{Fail: f.Op}), any(diskFault{Fail: failOff})
	if f.Kind == Clock {
		route, on, off = node.URL()+"/debug/faults/clock", clockFault{StepMs: f.StepMs}, clockFault{StepMs: -f.StepMs}
	}
	if err := n.send(ctx, http.MethodPost, route, on); err != nil {
		return fmt.Errorf("%s on %s: %w", f.Kind, node.ID, err)
	}
	// The node says what it now injects: a route that answered 204 and
	// changed nothing would make a clean run of nothing.
	var st faultState
	if err := n.getJSON(ctx, node.URL()+"/debug/faults", &st); err != nil {
		return fmt.Errorf("%s on %s: reading /debug/faults: %w", f.Kind, node.ID, err)
	}
	if f.Kind == Disk && st.Disk != f.Op {
		return fmt.Errorf("%s on %s: /debug/faults says disk %q, want %q", f.Kind, node.ID, st.Disk, f.Op)
	}
	n.logf("%s on %s: the node injects disk %s, clock offset %+d ms", f.Kind, node.ID, st.Disk, st.ClockOffsetMs)
	if !sleep(ctx, f.Hold) {
		return ctx.Err()
	}
	if node.Proc.Running() {
		if err := n.send(ctx, http.MethodPost, route, off); err != nil {
			return fmt.Errorf("undoing %s on %s: %w", f.Kind, node.ID, err)
		}
	} else {
		r.Note = fmt.Sprintf("exited under the fault (%v): started again", node.Proc.ExitErr())
		n.logf("%s exited under %s (%v); starting it again on its data", node.ID, f.Kind, node.Proc.ExitErr())
		if err := n.c.StartNode(node); err != nil {
			return err
		}
	}
	if err := n.waitReady(ctx, node); err != nil {
		return fmt.Errorf("%s after %s: %w: %w", node.ID, f.Kind, errNodeLost, err)
	}
	return nil
}

// upgrade is one step of a rolling upgrade (Upgrade): node idx stopped
// with SIGTERM, so that it hands its partitions off, started again on its
// data with the run's own narad, ready, and every move settled: none
// stuck between an old node and a new one.
func (n *nemesis) upgrade(ctx context.Context, idx int, r *ran) error {
	node := n.c.Nodes[idx]
	took, err := n.c.Stop(ctx, node, n.cfg.stopTimeout)
	r.Exit = took
	switch {
	case errors.Is(err, proc.ErrTimeout):
		r.Note = fmt.Sprintf("no exit within %s of SIGTERM: killed", seconds(n.cfg.stopTimeout))
	case err != nil:
		return err
	}
	// Every restart from here on runs the new binary; the nodes not
	// upgraded yet are not restarted before their turn.
	n.c.Bin = n.bin
	if err := n.c.StartNode(node); err != nil {
		return err
	}
	if err := n.waitReady(ctx, node); err != nil {
		return fmt.Errorf("%s after its upgrade: %w: %w", node.ID, errNodeLost, err)
	}
	if err := n.settled(ctx, node); err != nil {
		return fmt.Errorf("moves after %s's upgrade: %w: %w", node.ID, errNodeLost, err)
	}
	n.logf("%s runs %s, no move in flight", node.ID, n.bin)
	return nil
}

// settled waits until node lists no move, within -settle-timeout.
func (n *nemesis) settled(ctx context.Context, node *proc.Node) error {
	return proc.Poll(ctx, n.cfg.settleTimeout, 200*time.Millisecond, node.Proc, func() bool {
		var l messages.MoveList
		return n.getJSON(ctx, node.URL()+"/v1/cluster/moves", &l) == nil && len(l.Moves) == 0
	})
}

// finalize ends a rolling upgrade: it asks the cluster version of the
// first node and moves it to the highest every member reads, which must be
// the newest this bench knows (every node runs the run's narad now).
func (n *nemesis) finalize(ctx context.Context) error {
	node := n.c.Nodes[0]
	var v messages.ClusterVersionInfo
	if err := n.getJSON(ctx, node.URL()+"/v1/cluster/version", &v); err != nil {
		return fmt.Errorf("the cluster version after the upgrade: %w", err)
	}
	if v.Finalizable != messages.ClusterVersionNewest {
		return fmt.Errorf("after the upgrade every member reads %d, want %d (members: %+v): %w", v.Finalizable, messages.ClusterVersionNewest, v.Members, errNodeLost)
	}
	if v.Version < v.Finalizable {
		if err := n.send(ctx, http.MethodPost, node.URL()+"/v1/cluster/version", messages.FinalizeClusterVersion{Version: v.Finalizable}); err != nil {
			return fmt.Errorf("finalize the cluster version %d: %w", v.Finalizable, err)
		}
	}
	if err := n.getJSON(ctx, node.URL()+"/v1/cluster/version", &v); err != nil {
		return err
	}
	if v.Version != messages.ClusterVersionNewest {
		return fmt.Errorf("after the finalize: version %d, want %d: %w", v.Version, messages.ClusterVersionNewest, errNodeLost)
	}
	n.logf("cluster version finalized at %d", v.Version)
	return nil
}
