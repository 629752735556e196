package mover

import (
	"context"
	"fmt"
	"time"

	"github.com/naradmq/narad/messages"
)

// The node's ports for Effects: the move's source over the router's move
// groups (Source), and the metastore's leaders (Store). Each request is
// bounded by RequestTimeout and answers before it returns: the work that
// calls them already runs on a goroutine of its own (worker.Go).

// sourcePort is the Source as the effects' SourcePort. Routing goes to
// the partition's owner, which is the source for as long as the move
// runs.
type sourcePort struct {
	peer    Source
	key     messages.PartitionKey
	source  string
	timeout time.Duration
	// inline: a listing carries the bytes of a partition this small.
	inline int
}

func (p sourcePort) Handoff(ctx context.Context, h messages.Handoff, alone bool, done func(*messages.HandoffResult, error)) {
	res, err := p.ask(ctx, alone, &h)
	if err != nil {
		done(nil, err)
		return
	}
	r, ok := res.(*messages.HandoffResult)
	if !ok {
		done(nil, fmt.Errorf("handoff of %s at %s: %v", keyString(p.key), p.source, messages.Describe(res)))
		return
	}
	done(r, nil)
}

func (p sourcePort) List(ctx context.Context, alone bool, done func(*messages.PartitionListing, error)) {
	res, err := p.ask(ctx, alone, &messages.ListPartition{InlineBytes: p.inline})
	if err != nil {
		done(nil, err)
		return
	}
	ls, ok := res.(*messages.PartitionListing)
	if !ok {
		done(nil, fmt.Errorf("list %s at %s: %v", keyString(p.key), p.source, messages.Describe(res)))
		return
	}
	done(ls, nil)
}

// ask sends a move request to the source. A request alone never waits for
// a group (Source.AskAlone): the final listing and the fence of a freeze,
// which every write to the partition waits for (a group answers when its
// slowest item does, and the hand-off's measured freeze grew by a fifth in
// groups). A prepare never travels in a group either: the source's Ask
// keeps it out.
func (p sourcePort) ask(ctx context.Context, alone bool, msg any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if alone {
		return p.peer.AskAlone(ctx, p.key, msg)
	}
	return p.peer.Ask(ctx, p.key, msg)
}

// metaPort is the Store as the effects' MetaPort.
type metaPort struct {
	store   Store
	key     messages.PartitionKey
	timeout time.Duration
}

func (p metaPort) Flip(ctx context.Context, f messages.Flip, done func(messages.AssignResult, error)) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	done(p.store.Flip(ctx, f))
}

func (p metaPort) LeaderAssignment(ctx context.Context, done func(messages.Assignment, bool, error)) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	done(p.store.LeaderAssignment(ctx, p.key.Incarnation, p.key.Partition))
}

func (p metaPort) LeaderMember(ctx context.Context, id string, done func(messages.Member, bool, error)) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ms, err := p.store.LeaderMembers(ctx)
	if err != nil {
		done(messages.Member{}, false, err)
		return
	}
	for _, m := range ms {
		if m.ID == id {
			done(m, true, nil)
			return
		}
	}
	done(messages.Member{}, false, nil)
}
