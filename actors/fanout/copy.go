package fanout

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// group is the records of one batch bound for one child partition.
type group struct {
	partition int
	records   []messages.CommitRecord
}

// duePrefix is how many of recs (in offset order) a child with delay may
// have at now, and, when not all, when the next one falls due. Commit
// times may step back a little (a clock adjusted), so the first record not
// yet due ends the prefix: the cursor never passes a record not copied.
func duePrefix(recs []storage.Record, delay time.Duration, now time.Time) (int, time.Time) {
	if delay <= 0 {
		return len(recs), time.Time{}
	}
	for i, r := range recs {
		due := time.Unix(0, r.Time).Add(delay)
		if due.After(now) {
			return i, due
		}
	}
	return len(recs), time.Time{}
}

// groupRecords sorts a batch by the child partition of each record's key
// (partitionOf, the produce rule), keeping the key, in offset order within
// a group. Corrupt records (a damaged frame in a sealed segment) have
// nothing to copy.
func groupRecords(recs []storage.Record, partitions int, partitionOf func(key string, partitions int) int) []group {
	var groups []group
	at := map[int]int{}
	for _, r := range recs {
		if r.Corrupt {
			continue
		}
		p := partitionOf(string(r.Key), partitions)
		i, ok := at[p]
		if !ok {
			i = len(groups)
			at[p] = i
			groups = append(groups, group{partition: p})
		}
		groups[i].records = append(groups[i].records, messages.CommitRecord{Seq: uint64(r.Offset), Key: r.Key, Body: r.Body})
	}
	return groups
}

// copy commits the groups to the child's partitions, all at once, on a
// goroutine of its own that ends when each commit has answered or timed
// out (Deps.RequestTimeout).
func (f *Actor) copy(ctx actor.Context, l *linkState, groups []group, upto int64) {
	child, ok := f.d.Route.Topic(l.link.Name)
	if !ok || child.Incarnation != l.link.Incarnation {
		f.failed(l, fmt.Errorf("child topic %s (incarnation %d) is gone", l.link.Name, l.link.Incarnation))
		return
	}
	l.sending, l.pending, l.upto = true, nil, upto
	self, root, route, timeout := ctx.Self(), ctx.ActorSystem().Root, f.d.Route, f.d.RequestTimeout
	name, epoch := l.link.Name, l.link.AttachEpoch
	// One per link at most (l.sending); it ends when every commit has
	// answered or the timeout passed.
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		failed := make([]error, len(groups))
		var wg sync.WaitGroup
		for i, g := range groups {
			wg.Go(func() {
				k := messages.PartitionKey{Topic: child.Name, Incarnation: child.Incarnation, Partition: route.LivePartition(child, g.partition)}
				failed[i] = commitGroup(cctx, route, k, g.records)
			})
		}
		wg.Wait()
		out := sent{child: name, epoch: epoch, upto: upto}
		for i, err := range failed {
			if err != nil {
				out.pending = append(out.pending, groups[i])
				out.err = err
			}
		}
		root.Send(self, out)
	}()
}

func commitGroup(ctx context.Context, route Route, k messages.PartitionKey, recs []messages.CommitRecord) error {
	res, err := route.Ask(ctx, k, &messages.Commit{Key: k, Records: recs})
	if err != nil {
		return err
	}
	r, ok := res.(*messages.CommitResult)
	switch {
	case !ok:
		return fmt.Errorf("commit to %s/%d answered %T", k.Topic, k.Partition, res)
	case r.Status != messages.StatusOK:
		return fmt.Errorf("commit to %s/%d: status %d: %s", k.Topic, k.Partition, r.Status, r.Err)
	}
	return nil
}
