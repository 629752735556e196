package clusterview

import (
	"context"
	"slices"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// PacingCounts is the freeze pacer's figures: partitions frozen here as a
// move's source, and prepares it holds (rule B5); zeros when the pacer
// does not answer in time.
func (v *View) PacingCounts(ctx context.Context) (frozen, held int) {
	res, err := v.d.Request(ctx, v.d.Pacer, freeze.PaceCounts{})
	if a, ok := res.(freeze.PaceCountsAnswer); err == nil && ok {
		return a.Frozen, a.Held
	}
	return 0, 0
}

// moveCounts is this node's share of the moves summary: its counters as a
// destination since it started, and its freeze pacer's figures now.
func (v *View) moveCounts(ctx context.Context) messages.MoveCounts {
	frozen, held := v.PacingCounts(ctx)
	return messages.MoveCounts{Done: int64(v.d.MovesDone.Get()), BytesCopied: int64(v.d.MoveBytes.Get()),
		Frozen: frozen, Held: held}
}

// moveCountsService answers a node's moveCounts to the node that gathers
// a summary.
const moveCountsService = "move-counts"

func (v *View) serveMoveCounts() error {
	return transport.HandleJSON(v.d.NATS, moveCountsService, func(ctx context.Context, _ string, _ struct{}) (messages.MoveCounts, error) {
		return v.moveCounts(ctx), nil
	})
}

// moveSummary sums the figures of every member not marked dead (a dead
// one's counters are out of reach and its pacer arms nothing), asking
// them all at once. It spends at most half of what is left of the
// caller's budget (and RequestTimeout), so that a member that hangs costs
// the summary its share, named in Missing, not the listing its answer.
func (v *View) moveSummary(ctx context.Context, inFlight int) messages.MoveSummary {
	counts := map[string]messages.MoveCounts{v.d.NodeID: v.moveCounts(ctx)}
	var asked []string
	if v.d.NATS != nil {
		for _, m := range v.d.Replica.Members() {
			if m.ID != v.d.NodeID && m.Status != messages.MemberDead {
				asked = append(asked, m.ID)
			}
		}
	}
	answers, _ := askEach[messages.MoveCounts](ctx, v.d.NATS, asked, moveCountsService, struct{}{}, v.FanOutBudget(ctx))
	for id, c := range answers {
		counts[id] = c
	}
	return sumMoveCounts(counts, asked, inFlight)
}

// sumMoveCounts adds up the nodes' counts; asked are the members other
// than this node that were asked, and those missing from counts did not
// answer.
func sumMoveCounts(counts map[string]messages.MoveCounts, asked []string, inFlight int) messages.MoveSummary {
	s := messages.MoveSummary{InFlight: inFlight, Nodes: len(counts)}
	for _, c := range counts {
		s.Done += c.Done
		s.BytesCopied += c.BytesCopied
		s.Frozen += c.Frozen
		s.Held += c.Held
	}
	for _, id := range asked {
		if _, ok := counts[id]; !ok {
			s.Missing = append(s.Missing, id)
		}
	}
	slices.Sort(s.Missing)
	return s
}
