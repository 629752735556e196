package sim

import "time"

// The simulated network: every request and answer between nodes, and
// between a node and the metastore, is a message that takes a random
// latency (with rare spikes), and while the faults last may be dropped or
// delivered twice. Random latencies reorder messages. A node cut off sends
// and receives nothing; a node that is down receives nothing. To add a
// fault here, draw it in deliver from w.rng, and only while w.faulty, so
// that the world still settles once the faults stop.

// endpoint is a node, or the metastore (nil node).
type endpoint = *node

// reachable reports whether a message can pass between a and b now.
func (w *world) reachable(a, b endpoint) bool {
	for _, e := range []endpoint{a, b} {
		if e != nil && (!e.up || e.cutUntil > w.now) {
			return false
		}
	}
	return true
}

func (w *world) latency() time.Duration {
	switch {
	case w.faulty && w.chance(0.02):
		return w.between(200*time.Millisecond, 4*time.Second)
	case w.chance(0.1):
		return w.between(5*time.Millisecond, 60*time.Millisecond)
	}
	return w.between(200*time.Microsecond, 3*time.Millisecond)
}

// deliver sends one message from a to b: fn runs at b when it arrives, if
// b can still receive then.
func (w *world) deliver(a, b endpoint, fn func()) {
	if !w.reachable(a, b) {
		return
	}
	copies := 1
	if w.faulty {
		switch {
		case w.chance(0.02):
			return
		case w.chance(0.01):
			copies = 2
		}
	}
	epoch := b.epochOf()
	extra := time.Duration(0)
	if a != nil && b == nil && a.slowNext > 0 {
		// an aimed fault: this node's next message to the metastore is slow
		extra, a.slowNext = a.slowNext, 0
	}
	for range copies {
		w.at(w.latency()+extra, func() {
			if w.reachable(nil, b) && b.epochOf() == epoch {
				fn()
			}
		})
	}
}

// call is a request from a to b with an answer: serve runs at b and
// answers through reply (at most once counts); done runs at a with the
// answer, or with ok false after requestTimeout, once. alive says whether
// the caller still wants an answer (the worker that asked still runs).
func (w *world) call(a, b endpoint, alive func() bool, serve func(reply func(any)), done func(ans any, ok bool)) {
	finish := w.answerOnce(a, alive, done)
	w.deliver(a, b, func() {
		answered := false
		serve(func(ans any) {
			if answered {
				return
			}
			answered = true
			w.deliver(b, a, func() { finish(ans, true) })
		})
	})
}

// answerOnce returns what answers a request of a: done runs once, with
// the first answer, or with ok false after requestTimeout, unless a
// rebooted meanwhile or the caller no longer wants it (alive).
func (w *world) answerOnce(a endpoint, alive func() bool, done func(ans any, ok bool)) func(ans any, ok bool) {
	finished, epoch := false, a.epochOf()
	finish := func(ans any, ok bool) {
		if finished || a.epochOf() != epoch || !alive() {
			finished = true
			return
		}
		finished = true
		done(ans, ok)
	}
	w.at(requestTimeout, func() { finish(nil, false) })
	return finish
}

// epochOf is a node's boot count, or 0 for the metastore: a message meant
// for an earlier boot is lost with that boot's memory.
func (n *node) epochOf() int {
	if n == nil {
		return 0
	}
	return n.epoch
}

// Move groups (actors/route/movegroup.go): a node's listings, re-arms, fences and
// releases for one source travel together, one message each way, so the
// faults of the network take or double a whole group at once, and a source
// that goes down mid-group answers none of it. A group gathers the
// requests made within groupWindow of its first; each request keeps its
// own timeout and is answered alone.

// groupWindow is how long a forming group takes more requests: the real
// client takes what waits while an earlier group is out, about a round
// trip.
const groupWindow = 3 * time.Millisecond

// groupItem is one request in a group.
type groupItem struct {
	serve  func(reply func(any))
	finish func(ans any, ok bool)
}

// groupKey names the groups forming from one node to another.
type groupKey struct{ from, to *node }

// groupCall is call, carried in the group forming from a to b.
func (w *world) groupCall(a, b *node, alive func() bool, serve func(reply func(any)), done func(ans any, ok bool)) {
	finish := w.answerOnce(a, alive, done)
	k := groupKey{a, b}
	items, forming := w.forming[k]
	w.forming[k] = append(items, groupItem{serve: serve, finish: finish})
	if !forming {
		w.at(groupWindow, func() {
			g := w.forming[k]
			delete(w.forming, k)
			w.stats.Groups++
			if len(g) > 1 {
				w.stats.SharedGroups++
			}
			w.carryGroup(a, b, g)
		})
	}
}

// carryGroup sends one group and its answer: the source answers once
// every item has, in one message.
func (w *world) carryGroup(a, b *node, items []groupItem) {
	w.deliver(a, b, func() {
		answers, answered, left := make([]any, len(items)), make([]bool, len(items)), len(items)
		for i, it := range items {
			it.serve(func(ans any) {
				if answered[i] {
					return
				}
				answered[i], answers[i] = true, ans
				if left--; left == 0 {
					w.deliver(b, a, func() {
						for j, it := range items {
							it.finish(answers[j], true)
						}
					})
				}
			})
		}
	})
}
