package clusterview

import (
	"context"
	"fmt"
	"time"

	"github.com/naradmq/narad/cluster/transport"
)

// askEach sends in to service on each of ids at once and waits for them
// all, for at most budget: the answers of those that answered, and why
// each other did not.
func askEach[Out any](ctx context.Context, t *transport.Transport, ids []string, service string, in any, budget time.Duration) (map[string]Out, map[string]error) {
	answers, errs := map[string]Out{}, map[string]error{}
	if len(ids) == 0 {
		return answers, errs
	}
	if t == nil {
		for _, id := range ids {
			errs[id] = fmt.Errorf("%s: no NATS to ask it over", id)
		}
		return answers, errs
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	type answer struct {
		id  string
		out Out
		err error
	}
	// One request per member, each ending with ctx at the latest.
	ch := make(chan answer, len(ids))
	for _, id := range ids {
		go func() {
			var out Out
			err := transport.RequestJSON(ctx, t, id, service, in, &out)
			ch <- answer{id, out, err}
		}()
	}
	for range ids {
		a := <-ch
		if a.err != nil {
			errs[a.id] = a.err
			continue
		}
		answers[a.id] = a.out
	}
	return answers, errs
}
