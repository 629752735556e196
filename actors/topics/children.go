package topics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// The client side of fan-out (contract §7): attach, list with lag, detach.
// The links live in the metadata shard; each parent partition's owner
// copies records to the children (actors/fanout).

// anchorPoll is how often an attach reads the parent's stats while it
// waits for the owners to anchor the link: each read asks every owner,
// and the wait is bounded by FanoutAnchorWait.
const anchorPoll = 20 * time.Millisecond

// AttachChild stores the link, then waits for every parent partition's
// owner to anchor it, so a record whose produce starts after the answer
// reaches the child.
func (c *Catalog) AttachChild(ctx context.Context, parent, child string, delayMs int64) (messages.TopicInfo, error) {
	p, err := c.deps.Store.AttachChild(ctx, parent, child, delayMs)
	if err != nil {
		return messages.TopicInfo{}, fmt.Errorf("attach %s to %s: %w", child, parent, fanoutError(err))
	}
	c.awaitAnchors(ctx, p, child)
	return Info(p), nil
}

// DetachChild removes the link; the owners drop its cursors as they see it
// gone.
func (c *Catalog) DetachChild(ctx context.Context, parent, child string) error {
	if _, err := c.deps.Store.DetachChild(ctx, parent, child); err != nil {
		return fmt.Errorf("detach %s from %s: %w", child, parent, fanoutError(err))
	}
	return nil
}

// Children lists the parent's links in attach order, each with its lag
// from the owners' stats.
func (c *Catalog) Children(ctx context.Context, parent string) (messages.ChildList, error) {
	t, ok := c.deps.Store.Topic(parent)
	if !ok {
		return messages.ChildList{}, fmt.Errorf("children of %s: topic %w", parent, errs.ErrNotFound)
	}
	var stats []*messages.PartitionStats
	if len(t.Children) > 0 {
		for _, o := range c.ownerStats(ctx, t, -1, false) {
			stats = append(stats, o.stats)
		}
	}
	return childList(t, stats), nil
}

// childList is t's children with their lag: over the parent's
// partitions, the sum of HWM − cursor. A partition whose owner did not
// answer (nil stats), or answered without a cursor for the child, makes
// the lag incomplete.
func childList(t messages.Topic, stats []*messages.PartitionStats) messages.ChildList {
	out := messages.ChildList{Parent: t.Name, Children: []messages.ChildInfo{}}
	for _, l := range t.Children {
		c := messages.ChildInfo{Name: l.Name, DelayMs: l.DelayMs, LagComplete: len(stats) == t.Partitions}
		for _, st := range stats {
			cursor, ok := cursorOf(st, l.Name)
			if !ok {
				c.LagComplete = false
				continue
			}
			c.LagMessages += max(st.HighWatermark-cursor, 0)
		}
		out.Children = append(out.Children, c)
	}
	return out
}

func cursorOf(st *messages.PartitionStats, child string) (int64, bool) {
	if st == nil {
		return 0, false
	}
	c, ok := st.Cursors[child]
	return c, ok
}

// awaitAnchors waits, at most FanoutAnchorWait, for every partition of
// parent to show a cursor for child in its owner's stats. Past the wait
// the attach answers anyway: an owner that is down commits nothing
// meanwhile, so it anchors where it would have.
func (c *Catalog) awaitAnchors(ctx context.Context, parent messages.Topic, child string) {
	ctx, cancel := context.WithTimeout(ctx, c.deps.Config.AnchorWait)
	defer cancel()
	missing := untilAnchored(ctx, c.deps.Clock, anchorPoll, func(ctx context.Context) []int {
		return unanchored(parent.Partitions, c.ownerStats(ctx, parent, -1, false), child)
	})
	if len(missing) > 0 {
		c.deps.Log.Warn("attach answered before every owner anchored the link", "parent", parent.Name, "child", child,
			"wait", c.deps.Config.AnchorWait, "partitions", missing)
	}
}

// unanchored are the partitions, of partitions, with no cursor for child
// in stats.
func unanchored(partitions int, stats []ownerStat, child string) []int {
	anchored := make([]bool, partitions)
	for _, o := range stats {
		if _, ok := cursorOf(o.stats, child); ok && o.owner.Partition < partitions {
			anchored[o.owner.Partition] = true
		}
	}
	var out []int
	for p, ok := range anchored {
		if !ok {
			out = append(out, p)
		}
	}
	return out
}

// untilAnchored asks check every poll of clk until it answers no
// partition or ctx ends, and returns its last answer.
func untilAnchored(ctx context.Context, clk clock.Clock, poll time.Duration, check func(context.Context) []int) []int {
	for {
		missing := check(ctx)
		if len(missing) == 0 {
			return nil
		}
		if clock.Sleep(ctx, clk, poll) != nil {
			return missing
		}
	}
}

// refusalError is a fan-out refusal as the API answers it: 400 with the
// contract's "invalid argument: " prefix, or 404/409 with the reason as is.
func refusalError(op string, code messages.ResultCode, reason string) error {
	switch code {
	case messages.ResultInvalid:
		return fmt.Errorf("%s: %w", op, errs.Invalid(reason))
	case messages.ResultNotFound:
		return fmt.Errorf("%s: %w", op, &errs.Refusal{Kind: errs.ErrNotFound, Reason: reason})
	case messages.ResultConflict:
		return fmt.Errorf("%s: %w", op, &errs.Refusal{Kind: errs.ErrConflict, Reason: reason})
	}
	return fmt.Errorf("%s: %s (result %d): %w", op, reason, code, partition.ErrInvariant)
}

// fanoutError is fromMetastore, with a refusal's reason kept for the
// client.
func fanoutError(err error) error {
	re, ok := errors.AsType[*metastore.RefusedError](err)
	if !ok {
		return errs.FromMetastore(err)
	}
	switch {
	case errors.Is(re, metastore.ErrInvalid):
		return refusalError(re.Op, messages.ResultInvalid, re.Reason)
	case errors.Is(re, metastore.ErrNotFound):
		return refusalError(re.Op, messages.ResultNotFound, re.Reason)
	case errors.Is(re, metastore.ErrConflict):
		return refusalError(re.Op, messages.ResultConflict, re.Reason)
	}
	return errs.FromMetastore(err)
}
