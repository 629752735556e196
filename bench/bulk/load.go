package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/bench/proc"
	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/messages"
)

// part names one partition.
type part struct {
	topic string
	index int
}

// layout is the topics of a scenario and their partitions, in order.
type layout struct {
	topics []messages.CreateTopicRequest
	parts  []part
}

// newLayout spreads n partitions over topics of at most perTopic each (the
// last topic takes the rest, at least 3: the API's minimum).
func newLayout(prefix string, topics, perTopic int) layout {
	var l layout
	for i := range topics {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		l.topics = append(l.topics, messages.CreateTopicRequest{Name: name, Partitions: perTopic})
		for p := range perTopic {
			l.parts = append(l.parts, part{topic: name, index: p})
		}
	}
	return l
}

// brokers are clients of the nodes a phase talks to, taken in turn.
type brokers struct {
	list  []*client.Broker
	bases []string
	next  atomic.Uint64
}

func newBrokers(nodes []*proc.Node, conns int) (*brokers, error) {
	b := &brokers{}
	for _, n := range nodes {
		c, err := client.New(n.URL(), client.Options{Conns: conns, Timeout: apiTimeout, User: benchUser, Password: benchPassword})
		if err != nil {
			return nil, err
		}
		b.list = append(b.list, c)
		b.bases = append(b.bases, n.URL())
	}
	return b, nil
}

func (b *brokers) pick() *client.Broker {
	return b.list[b.next.Add(1)%uint64(len(b.list))]
}

// pickBase is the base URL of the next node in turn, for the routes the
// client has no method for.
func (b *brokers) pickBase() string {
	return b.bases[b.next.Add(1)%uint64(len(b.bases))]
}

func (b *brokers) close() {
	for _, c := range b.list {
		c.Close()
	}
}

// createTopics creates the layout's topics, conc at a time.
func createTopics(ctx context.Context, b *brokers, l layout, conc int) error {
	return proc.ForEach(ctx, l.topics, conc, func(ctx context.Context, t messages.CreateTopicRequest) error {
		for attempt := 0; ; attempt++ {
			_, err := b.pick().CreateTopic(ctx, t)
			if err == nil || client.IsStatus(err, 409) && attempt > 0 {
				// 409 after a retry: the first attempt made it.
				return nil
			}
			if !client.IsRetryable(err) {
				return err
			}
			if err := pause(ctx, attempt); err != nil {
				return err
			}
		}
	})
}

// Retry pauses: short, since every node is on this machine and a retry
// that waits long would count as the figure's own time.
const (
	retryFirst = 20 * time.Millisecond
	retryLimit = time.Second
)

// pause waits before retry attempt (from 0) and reports a ctx that ended.
func pause(ctx context.Context, attempt int) error {
	client.Sleep(ctx, client.Backoff(attempt+1, retryFirst, retryLimit))
	return ctx.Err()
}

// writer produces records with ids the history checker can find again.
type writer struct {
	b   *brokers
	h   *history.History
	pad int
}

// produce sends one record to p until some node answers 202; each attempt
// carries an id of its own, and a failed one is recorded as maybe produced.
func (w *writer) produce(ctx context.Context, p part, id string) error {
	idx := p.index
	for attempt := 0; ; attempt++ {
		aid := id + "." + strconv.Itoa(attempt)
		err := w.b.pick().Produce(ctx, p.topic, history.MakeBody(aid, w.pad), "", &idx)
		if err == nil {
			w.h.Produced(aid)
			return nil
		}
		w.h.ProduceFailed(aid)
		if !client.IsRetryable(err) {
			return err
		}
		if perr := pause(ctx, attempt); perr != nil {
			return fmt.Errorf("%w (last answer: %v)", perr, err)
		}
	}
}

// fill writes n records to every partition.
func (w *writer) fill(ctx context.Context, l layout, phase string, n, conc int) error {
	type job struct {
		p part
		i int
	}
	jobs := make([]job, 0, len(l.parts)*n)
	for i := range n {
		for _, p := range l.parts {
			jobs = append(jobs, job{p, i})
		}
	}
	return proc.ForEach(ctx, jobs, conc, func(ctx context.Context, j job) error {
		return w.produce(ctx, j.p, fmt.Sprintf("%s/%s/%d/%d", phase, j.p.topic, j.p.index, j.i))
	})
}

// hwmAttempts bounds the reads of one topic's stats in hwms: every node is
// up when it runs, so a failure is a moment's 503, not an owner away.
const hwmAttempts = 5

// hwms reads every partition's high watermark, one topic read at a time
// per worker; a topic that cannot be read in hwmAttempts fails it.
func hwms(ctx context.Context, b *brokers, l layout, conc int) (map[part]int64, error) {
	var mu sync.Mutex
	out := make(map[part]int64, len(l.parts))
	err := proc.ForEach(ctx, l.topics, conc, func(ctx context.Context, t messages.CreateTopicRequest) error {
		var d messages.TopicDetails
		var err error
		for attempt := range hwmAttempts {
			d, err = b.pick().GetTopic(ctx, t.Name)
			if err == nil && len(d.PartitionStats) != t.Partitions {
				// An owner that answers "not served" is left out (the
				// contract: poll until every partition has an entry); the
				// error is retryable, so the loop reads again.
				err = fmt.Errorf("stats of %s: %d partitions of %d answered, missing %v: %w",
					t.Name, len(d.PartitionStats), t.Partitions, missingPartitions(d, t.Partitions), errPartialStats)
			}
			if err == nil || !client.IsRetryable(err) {
				break
			}
			if perr := pause(ctx, attempt); perr != nil {
				return perr
			}
		}
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range d.PartitionStats {
			out[part{t.Name, s.Index}] = s.HighWatermark
		}
		return nil
	})
	return out, err
}

// errPartialStats is a topic read that left some partition out.
var errPartialStats = errors.New("partial partition stats")

// missingPartitions lists the partitions of a topic of n that d has no
// stats entry for.
func missingPartitions(d messages.TopicDetails, n int) []int {
	seen := make([]bool, n)
	for _, s := range d.PartitionStats {
		if s.Index >= 0 && s.Index < n {
			seen[s.Index] = true
		}
	}
	var out []int
	for p, ok := range seen {
		if !ok {
			out = append(out, p)
		}
	}
	return out
}

// waitResult is how a wait for high watermarks ended.
type waitResult struct {
	took  time.Duration // from the wait's start to the read that saw the last mark
	moved int           // partitions that reached their mark
	total int
	err   error // proc.ErrTimeout or what stopped the wait
}

// marks tracks the partitions whose high watermark has not reached its mark
// yet. It is safe for concurrent use.
type marks struct {
	mu     sync.Mutex
	left   map[string]map[int]int64 // topic, partition: the mark
	n      int
	lastAt time.Time // when the last partition reached its mark
	// unread holds the partitions whose last single read failed.
	unread map[part]bool
}

func newMarks(l layout, base map[part]int64, delta int64) *marks {
	m := &marks{left: map[string]map[int]int64{}, n: len(l.parts), unread: map[part]bool{}}
	for _, p := range l.parts {
		if m.left[p.topic] == nil {
			m.left[p.topic] = map[int]int64{}
		}
		m.left[p.topic][p.index] = base[p] + delta
	}
	return m
}

// seen records a partition's high watermark as read.
func (m *marks) seen(topic string, index int, hwm int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mark, ok := m.left[topic][index]
	if !ok || hwm < mark {
		return
	}
	delete(m.left[topic], index)
	delete(m.unread, part{topic, index})
	m.n--
	if m.n == 0 {
		m.lastAt = time.Now()
	}
}

// topics lists, sorted, the topics with a partition short of its mark.
func (m *marks) topics() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for t, s := range m.left {
		if len(s) > 0 {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// shortOf lists the partitions of topics short of their mark, those whose
// last read failed at the end: an owner that is away answers nothing, and
// the partitions that can move are read first in each round.
func (m *marks) shortOf(topics []string) []part {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []part
	for _, t := range topics {
		for i := range m.left[t] {
			out = append(out, part{t, i})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		fi, fj := m.unread[out[i]], m.unread[out[j]]
		if fi != fj {
			return fj
		}
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].index < out[j].index
	})
	return out
}

// failed records a partition whose stats could not be read.
func (m *marks) failed(p part) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unread[p] = true
}

func (m *marks) remaining() (int, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n, m.lastAt
}

// waitHWM waits until every partition's high watermark is at least
// base[p]+delta, reading the stats of each topic still short every
// interval, for at most timeout from start. The partitions of a topic whose
// stats fail (an owner that does not answer) are read one by one after the
// topic reads, so that the partitions on live nodes still count.
func waitHWM(ctx context.Context, b *brokers, l layout, base map[part]int64, delta int64, conc int, interval, timeout time.Duration, start time.Time) waitResult {
	m := newMarks(l, base, delta)
	total := len(l.parts)
	deadline := start.Add(timeout)
	for {
		var failed []string
		var mu sync.Mutex
		err := proc.ForEach(ctx, m.topics(), conc, func(ctx context.Context, t string) error {
			d, err := b.pick().GetTopic(ctx, t)
			if err != nil {
				mu.Lock()
				failed = append(failed, t)
				mu.Unlock()
				return ctx.Err()
			}
			for _, s := range d.PartitionStats {
				m.seen(t, s.Index, s.HighWatermark)
			}
			return nil
		})
		if err == nil && len(failed) > 0 {
			sort.Strings(failed)
			err = proc.ForEach(ctx, m.shortOf(failed), conc, func(ctx context.Context, p part) error {
				s, err := partitionStats(ctx, b.pickBase(), p.topic, p.index)
				if err != nil {
					m.failed(p)
					return ctx.Err()
				}
				m.seen(p.topic, p.index, s.HighWatermark)
				return nil
			})
		}
		n, lastAt := m.remaining()
		switch {
		case n == 0:
			return waitResult{took: lastAt.Sub(start), moved: total, total: total}
		case err != nil:
			return waitResult{moved: total - n, total: total, err: err}
		case time.Now().After(deadline):
			return waitResult{moved: total - n, total: total, err: fmt.Errorf("after %v: %w", timeout, proc.ErrTimeout)}
		}
		select {
		case <-ctx.Done():
			return waitResult{moved: total - n, total: total, err: ctx.Err()}
		case <-time.After(interval):
		}
	}
}

// passResult is one write pass: one record to every partition.
type passResult struct {
	acked time.Duration // until every produce was answered 202
	wait  waitResult    // until every high watermark moved
}

// pass writes one record to every partition and, at the same time, waits
// until every high watermark is past base.
func (w *writer) pass(ctx context.Context, l layout, phase string, base map[part]int64, conc, pollConc int, interval, timeout time.Duration) (passResult, error) {
	var r passResult
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	waited := make(chan waitResult, 1)
	go func() {
		waited <- waitHWM(pctx, w.b, l, base, 1, pollConc, interval, timeout, start)
	}()
	err := proc.ForEach(pctx, l.parts, conc, func(ctx context.Context, p part) error {
		return w.produce(ctx, p, fmt.Sprintf("%s/%s/%d", phase, p.topic, p.index))
	})
	if err == nil {
		r.acked = time.Since(start)
	}
	r.wait = <-waited
	if ctx.Err() != nil {
		// Interrupted, not a figure.
		return r, ctx.Err()
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, proc.ErrTimeout) {
		return r, fmt.Errorf("%s: %w", phase, err)
	}
	if err != nil {
		r.acked = -1
	}
	return r, nil
}

// scan replays every record below each partition's high watermark into the
// history, which then knows what the cluster holds.
func scan(ctx context.Context, b *brokers, h *history.History, l layout, conc int) error {
	marks, err := hwms(ctx, b, l, conc)
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	return proc.ForEach(ctx, l.parts, conc, func(ctx context.Context, p part) error {
		hwm := marks[p]
		h.HighWatermark(p.topic, p.index, hwm)
		idx := p.index
		for off := int64(0); off < hwm; off++ {
			var m *messages.MessageInfo
			var err error
			for attempt := 0; ; attempt++ {
				m, err = b.pick().Consume(ctx, p.topic, client.ConsumeOptions{Partition: &idx, Offset: &off})
				if err == nil || !client.IsRetryable(err) || attempt == 5 {
					break
				}
				if err := pause(ctx, attempt); err != nil {
					return err
				}
			}
			if err != nil {
				return fmt.Errorf("scan %s/%d@%d: %w", p.topic, p.index, off, err)
			}
			if m == nil {
				continue
			}
			if id, ok := history.ParseBody(m.Payload); ok {
				h.Consumed(id, p.topic, m.Partition, m.Offset)
			}
		}
		return nil
	})
}
