package dispatch

import (
	"fmt"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics are the node's series the dispatcher sets. The node registers the
// counter with the rest of its series and hands over its set and name, so
// the gauges the dispatcher makes carry the node's label and no series name
// changes.
type Metrics struct {
	// Set and Node are the node's metrics set and node label.
	Set  *metrics.Set
	Node string
	// CommitsTooLarge counts commits refused before sending as larger than
	// the NATS max payload.
	CommitsTooLarge *metrics.Counter
}

// backlog records how many accepted records wait for commits at one owner
// node.
func (m Metrics) backlog(owner string, records int) {
	if owner == "" {
		owner = "unassigned"
	}
	m.Set.GetOrCreateGauge(fmt.Sprintf(`narad_dispatcher_backlog_records{node=%q,destination=%q}`, m.Node, owner), nil).Set(float64(records))
}

// dropped counts ingress WAL records released without a commit, by why
// (the drop reasons in actor.go).
func (m Metrics) dropped(why string, n int) {
	m.Set.GetOrCreateCounter(fmt.Sprintf(`narad_wal_records_dropped_total{node=%q,reason=%q}`, m.Node, why)).Add(n)
}

// reportBacklog sets, once a tick, how many records wait for each owner
// node; an owner with nothing waiting reads 0 rather than vanishing.
func (d *Actor) reportBacklog() {
	held, unknown := map[string]int{}, map[string]int{}
	for k, q := range d.queues {
		held[d.deps.Owners.OwnerOf(k)] += len(q.recs)
		for _, node := range q.unknown {
			unknown[node]++
		}
	}
	if d.reported == nil {
		d.reported = map[string]bool{}
	}
	for owner := range d.reported {
		if _, ok := held[owner]; !ok {
			held[owner] = 0
		}
	}
	for owner, n := range held {
		d.reported[owner] = true
		d.deps.Metrics.backlog(owner, n)
		d.setUnknownOutcome(owner, unknown[owner])
	}
	for node, n := range unknown {
		if _, ok := held[node]; !ok {
			d.reported[node] = true
			d.setUnknownOutcome(node, n)
		}
	}
}

// setUnknownOutcome sets narad_dispatcher_unknown_outcome_records: records
// whose commit to node has an unknown outcome, which wait for that node to
// answer or leave the cluster and are never rerouted meanwhile. An alert
// on it staying above 0 with the node dead says: remove the node (or
// bring it back) to release them.
func (d *Actor) setUnknownOutcome(node string, records int) {
	if node == "" {
		node = "unassigned"
	}
	d.deps.Metrics.Set.GetOrCreateGauge(fmt.Sprintf(`narad_dispatcher_unknown_outcome_records{node=%q,destination=%q}`, d.deps.Metrics.Node, node), nil).Set(float64(records))
}

// reroute sends what a partition holds to a live sibling partition, at the
// price of its key's order (rule K3), only when the partition will not take
// it soon: its owner is dead or gone (after RerouteGrace of failed commits),
// or it has answered frozen for RerouteGrace (a hand-off's freeze is far
