package storage

// Origin names where a record came from: the ingress WAL that accepted it
// (WAL, that WAL's random ID, never 0 for a real one) and its sequence
// number there. A partition log keeps the origins of the records it
// committed last, so a record a WAL replays after a crash, or a dispatcher
// sends again after losing the answer, is found already committed rather
// than stored twice. The zero Origin is "unknown": never recorded, never
// matched.
type Origin struct {
	WAL uint64
	Seq uint64
}

// recentOrigins is a bounded memory of committed origins, the newest kept:
// a ring of at most max entries, grown on demand so a partition that took
// few records holds few. It only ever says "committed" of an origin whose
// record was committed into the log that owns it; forgetting one (the ring
// wrapped, or a restart that did not reach it) costs a duplicate, never a
// record.
type recentOrigins struct {
	ring []Origin
	next int // where the next entry goes once the ring is full
	max  int
}

// add remembers o; the zero Origin is not remembered.
func (r *recentOrigins) add(o Origin) {
	if o.WAL == 0 || r.max <= 0 {
		return
	}
	if len(r.ring) < r.max {
		r.ring = append(r.ring, o)
		return
	}
	r.ring[r.next] = o
	r.next = (r.next + 1) % r.max
}

// has reports whether o is remembered. A linear scan: it runs only for
// records their sender says may have been committed already (a replay, a
// resend after a lost answer), never on the ordinary commit path.
func (r *recentOrigins) has(o Origin) bool {
	if o.WAL == 0 {
		return false
	}
	for _, x := range r.ring {
		if x == o {
			return true
		}
	}
	return false
}
