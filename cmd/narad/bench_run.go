package main

// The workers of narad bench: producers, consumers and the progress line
// of one run. They do what the load driver's do (bench/load), measured the
// same way (cmd/narad/measure), without its history check: a ledger of two
// bits a record says which records were produced and acked.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/cmd/narad/measure"
	"github.com/naradmq/narad/messages"
)

// benchMaxAttempts bounds the tries of one produce or ack that the broker
// answers with a retryable error, as the load driver's do.
const benchMaxAttempts = 4

// benchRun is the shared state of one run. Workers touch only atomics and
// the ledger; latencies stay per worker.
type benchRun struct {
	cfg benchConfig
	// bs has one client per server: producer and consumer i use
	// bs[i%len(bs)], the topic's checks bs[0].
	bs     []*client.Broker
	runID  string
	pad    []byte
	pacer  *measure.Pacer
	ledger *ledger // nil without --consume

	next atomic.Int64 // the last record number handed to a producer

	produced       atomic.Int64 // answered 202
	producedBytes  atomic.Int64
	produceRetries atomic.Int64 // failed attempts, retried or not
	produceGaveUp  atomic.Int64 // records whose every attempt failed
	behindNs       atomic.Int64 // the latest record's lateness against --rate
	consumed       atomic.Int64 // deliveries of this run's records
	ackedBytes     atomic.Int64
	acksRefused    atomic.Int64 // 410, or retries used up: redelivered later
	consumeErrors  atomic.Int64
	foreign        atomic.Int64 // records of other runs, acked and counted

	firstProduce   atomic.Int64 // unix ns of the first produce's start
	lastProduceEnd atomic.Int64 // unix ns of the last 202
	lastAck        atomic.Int64 // unix ns of the last ack of this run's records
	producersDone  atomic.Bool

	// samples are the latencies, one slice per worker, filled in as each
	// worker returns.
	produceLat, consumeLat, ackLat, e2eLat [][]time.Duration
}

func newBenchRun(cfg benchConfig, bs []*client.Broker) *benchRun {
	var id [4]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails on supported platforms
	r := &benchRun{cfg: cfg, bs: bs, runID: "b" + hex.EncodeToString(id[:]), pad: measure.Pad(cfg.sizeBytes)}
	if cfg.consume {
		r.ledger = newLedger(cfg.count)
	}
	return r
}

// recordID is record n's id: the run id and n, fixed width, so that every
// record of a run has the same overhead (benchMinSize).
func (r *benchRun) recordID(n int64) string {
	return fmt.Sprintf("%s-%0*d", r.runID, benchIDDigits, n)
}

// recordNumber is the n of one of this run's ids; ok is false for another
// run's record.
func (r *benchRun) recordNumber(id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, r.runID+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n >= 1 && n <= r.cfg.count
}

// execute runs the producers and consumers to their end: producers stop at
// --count, consumers once every record produced was acked or --drain after
// the producers stopped. It returns the first worker error that stopped
// the run; the caller's own cancellation is the caller's to report.
func (r *benchRun) execute(ctx context.Context, stderr io.Writer) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	consumers := 0
	if r.cfg.consume {
		consumers = r.cfg.consumers
	}
	r.produceLat = make([][]time.Duration, r.cfg.producers)
	r.consumeLat = make([][]time.Duration, consumers)
	r.ackLat = make([][]time.Duration, consumers)
	r.e2eLat = make([][]time.Duration, consumers)

	progressCtx, stopProgress := context.WithCancel(context.Background())
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		r.progress(progressCtx, measure.NewProgress(stderr, measure.IsTerminal(stderr), r.cfg.plainEvery))
	}()

	// Consumes get their own context so that the long-polls still open can
	// be cut short once the run is drained; acks keep runCtx, as an ack
	// must not be cut short.
	consumeCtx, stopConsuming := context.WithCancel(runCtx)
	defer stopConsuming()
	producersDone := make(chan struct{})

	var producerWG, consumerWG sync.WaitGroup
	for i := range consumers {
		consumerWG.Go(func() {
			if err := r.consumer(runCtx, consumeCtx, i, stopConsuming, producersDone); err != nil {
				cancel(err)
			}
		})
	}
	r.pacer = measure.NewPacer(r.cfg.ratePerSecond, time.Now())
	for i := range r.cfg.producers {
		producerWG.Go(func() {
			if err := r.producer(runCtx, i); err != nil {
				cancel(err)
			}
		})
	}
	producerWG.Wait()
	r.producersDone.Store(true)
	close(producersDone)
	drainTimer := time.AfterFunc(r.cfg.drain, stopConsuming)
	consumerWG.Wait()
	drainTimer.Stop()
	stopProgress()
	<-progressDone
	if cause := context.Cause(runCtx); cause != nil && ctx.Err() == nil {
		return cause
	}
	return nil
}

// producer sends records until the count is used up or ctx is done. A
// produce answered with a 4xx ends the run: it will not get better.
func (r *benchRun) producer(ctx context.Context, index int) error {
	if r.cfg.batch > 1 {
		return r.batchProducer(ctx, index)
	}
	var lat []time.Duration
	defer func() { r.produceLat[index] = lat }()
	for ctx.Err() == nil {
		n := r.next.Add(1)
		if n > r.cfg.count {
			return nil
		}
		if r.pacer.Wait(ctx, n) != nil {
			return nil
		}
		start := time.Now()
		r.firstProduce.CompareAndSwap(0, start.UnixNano())
		r.behindNs.Store(int64(r.pacer.Behind(n, start)))
		// The body keeps the first attempt's time, so that end to end
		// includes the retries.
		body := measure.MakeBody(r.recordID(n), start.UnixNano(), r.cfg.sizeBytes, r.pad)
		ok, err := r.produceOne(ctx, index, body)
		if err != nil {
			return err
		}
		if ok {
			end := time.Now()
			lat = append(lat, end.Sub(start))
			r.produced.Add(1)
			r.producedBytes.Add(int64(len(body)))
			measure.RaiseTo(&r.lastProduceEnd, end.UnixNano())
			if r.ledger != nil {
				r.ledger.produced(n)
			}
		}
	}
	return nil
}

// produceOne sends one record with bounded retries: the first attempt to
// the producer's own node, each retry to the next one, so that a node
// that is down costs one attempt a record. It reports whether the broker
// answered 202; err is set only for an answer that ends the run.
func (r *benchRun) produceOne(ctx context.Context, index int, body []byte) (bool, error) {
	for attempt := 1; attempt <= benchMaxAttempts; attempt++ {
		err := r.bs[(index+attempt-1)%len(r.bs)].Produce(ctx, r.cfg.topic, body, "", nil)
		if err == nil {
			return true, nil
		}
		r.produceRetries.Add(1)
		if ctx.Err() != nil {
			return false, nil
		}
		if !client.IsRetryable(err) {
			return false, fmt.Errorf("produce: %w", err)
		}
		client.Sleep(ctx, benchBackoff(attempt))
	}
	r.produceGaveUp.Add(1)
	return false, nil
}

// batchProducer is producer through the batch route: --batch records a
// request (fewer at the end of the count), as the load driver's -batch.
// Each record is answered alone: the ones refused with a 5xx go again in
// the next attempt, to the next node; one refused with a 4xx ends the run.
// Each accepted record's latency is its request's.
func (r *benchRun) batchProducer(ctx context.Context, index int) error {
	var lat []time.Duration
	defer func() { r.produceLat[index] = lat }()
	size := int64(r.cfg.batch)
	for ctx.Err() == nil {
		last := r.next.Add(size)
		first := last - size + 1
		if first > r.cfg.count {
			return nil
		}
		last = min(last, r.cfg.count)
		if r.pacer.Wait(ctx, first) != nil {
			return nil
		}
		start := time.Now()
		r.firstProduce.CompareAndSwap(0, start.UnixNano())
		r.behindNs.Store(int64(r.pacer.Behind(first, start)))
		nums := make([]int64, 0, last-first+1)
		recs := make([]messages.BatchRecord, 0, last-first+1)
		for n := first; n <= last; n++ {
			nums = append(nums, n)
			recs = append(recs, client.BatchRecordOf("", nil, measure.MakeBody(r.recordID(n), start.UnixNano(), r.cfg.sizeBytes, r.pad)))
		}
		for attempt := 1; len(recs) > 0; attempt++ {
			if attempt > benchMaxAttempts {
				r.produceGaveUp.Add(int64(len(recs)))
				break
			}
			out, err := r.bs[(index+attempt-1)%len(r.bs)].ProduceBatch(ctx, r.cfg.topic, recs)
			if err != nil {
				r.produceRetries.Add(int64(len(recs)))
				if ctx.Err() != nil {
					return nil
				}
				if !client.IsRetryable(err) {
					return fmt.Errorf("produce batch of %d: %w", len(recs), err)
				}
				client.Sleep(ctx, benchBackoff(attempt))
				continue
			}
			end := time.Now()
			var againNums []int64
			var againRecs []messages.BatchRecord
			for i, res := range out.Results {
				if res.Status == http.StatusAccepted {
					lat = append(lat, end.Sub(start))
					r.produced.Add(1)
					r.producedBytes.Add(int64(r.cfg.sizeBytes))
					if r.ledger != nil {
						r.ledger.produced(nums[i])
					}
					continue
				}
				r.produceRetries.Add(1)
				if res.Status < 500 {
					return fmt.Errorf("produce record %d: %d %s", nums[i], res.Status, res.Error)
				}
				againNums, againRecs = append(againNums, nums[i]), append(againRecs, recs[i])
			}
			measure.RaiseTo(&r.lastProduceEnd, end.UnixNano())
			nums, recs = againNums, againRecs
			if len(recs) > 0 {
				client.Sleep(ctx, benchBackoff(attempt))
			}
		}
	}
	return nil
}

// consumer pulls from its node and acks each record on the node that
// served it, until the producers are done and every record they got
// accepted was acked (it then calls stopConsuming, which ends the other
// consumers' long-polls too), or until consumeCtx is done (--drain passed,
// or the run stopped). After a failed consume it moves to the next node.
func (r *benchRun) consumer(ctx, consumeCtx context.Context, index int, stopConsuming func(), producersDone <-chan struct{}) error {
	var consumeLat, ackLat, e2eLat []time.Duration
	defer func() { r.consumeLat[index], r.ackLat[index], r.e2eLat[index] = consumeLat, ackLat, e2eLat }()
	failures, server := 0, index
	for consumeCtx.Err() == nil {
		select {
		case <-producersDone:
			if r.ledger.pending() <= 0 {
				stopConsuming()
				return nil
			}
		default:
		}
		b := r.bs[server%len(r.bs)]
		asked := time.Now()
		d, err := b.Consume(consumeCtx, r.cfg.topic, client.ConsumeOptions{Wait: r.cfg.wait})
		if err != nil {
			if consumeCtx.Err() != nil {
				return nil
			}
			if !client.IsRetryable(err) {
				return fmt.Errorf("consume: %w", err)
			}
			r.consumeErrors.Add(1)
			failures++
			server++
			client.Sleep(consumeCtx, benchBackoff(failures))
			continue
		}
		failures = 0
		if d == nil {
			continue
		}
		received := time.Now()
		consumeLat = append(consumeLat, received.Sub(asked))
		id, sent, ok := measure.ParseBody(d.Payload)
		n, mine := int64(0), false
		if ok {
			n, mine = r.recordNumber(id)
		}
		if mine {
			r.consumed.Add(1)
			e2eLat = append(e2eLat, received.Sub(time.Unix(0, sent)))
		} else {
			r.foreign.Add(1)
		}
		acked, took, err := r.ackOne(ctx, b, d)
		ackLat = append(ackLat, took)
		if err != nil {
			return err
		}
		// A record whose ack failed is not counted: its redelivery will be.
		if acked && mine && r.ledger.acked(n) {
			r.ackedBytes.Add(int64(len(d.Payload)))
			measure.RaiseTo(&r.lastAck, time.Now().UnixNano())
		}
	}
	return nil
}

// ackOne acks d on b (client.AckRetrying) and reports whether the broker
// took it, and how long the first try took. A 410 or the tries running
// out (the record comes again) is counted, not fatal.
func (r *benchRun) ackOne(ctx context.Context, b *client.Broker, d *messages.MessageInfo) (acked bool, first time.Duration, err error) {
	out, err := b.AckRetrying(ctx, r.cfg.topic, d.ReceiptHandle, benchMaxAttempts)
	if out.Lost {
		r.acksRefused.Add(1)
	}
	if err != nil {
		return false, out.First, fmt.Errorf("ack %d@%d: %w", d.Partition, d.Offset, err)
	}
	return out.Acked, out.First, nil
}

// benchBackoff doubles from 50 ms per attempt, capped at 1 s: the load
// driver's pauses.
func benchBackoff(attempt int) time.Duration {
	return client.Backoff(attempt, 50*time.Millisecond, time.Second)
}

// progress draws the progress line until ctx is done, then the final one.
func (r *benchRun) progress(ctx context.Context, p *measure.Progress) {
	t := time.NewTicker(r.cfg.redrawEvery)
	defer t.Stop()
	start := time.Now()
	last := benchSample{at: start}
	for {
		select {
		case <-ctx.Done():
			// The final line's rates are the averages over the whole run.
			p.Final(r.progressLine(benchSample{at: start}, r.sample(time.Now()), start))
			return
		case now := <-t.C:
			if !p.Due(now) {
				continue
			}
			cur := r.sample(now)
			p.Draw(now, r.progressLine(last, cur, start))
			last = cur
		}
	}
}

type benchSample struct {
	at              time.Time
	produced, acked int64
}

// sample reads the counts at now.
func (r *benchRun) sample(now time.Time) benchSample {
	s := benchSample{at: now, produced: r.produced.Load()}
	if r.ledger != nil {
		s.acked = r.ledger.ackedCount()
	}
	return s
}

// progressLine shows the totals at cur and the rates between prev and cur.
func (r *benchRun) progressLine(prev, cur benchSample, start time.Time) string {
	d := cur.at.Sub(prev.at)
	line := fmt.Sprintf("%6.1fs  produced %d/%d (%.0f/s)", cur.at.Sub(start).Seconds(), cur.produced, r.cfg.count, measure.Rate(cur.produced-prev.produced, d))
	if r.ledger != nil {
		line += fmt.Sprintf("  acked %d (%.0f/s)  pending %d", cur.acked, measure.Rate(cur.acked-prev.acked, d), max(r.ledger.pending(), 0))
	}
	return line
}

// summarize turns the run's counters and samples into its summary.
func (r *benchRun) summarize(interrupted bool) benchSummary {
	first := r.firstProduce.Load()
	produceTime := measure.Span(first, r.lastProduceEnd.Load())
	s := benchSummary{
		Topic: r.cfg.topic, RunID: r.runID, Servers: r.cfg.servers,
		Count: r.cfg.count, RecordBytes: r.cfg.sizeBytes, Producers: r.cfg.producers, Batch: r.cfg.batch,
		RatePerSecond: r.cfg.ratePerSecond, Interrupted: interrupted,

		Produced:              r.produced.Load(),
		ProducedBytes:         r.producedBytes.Load(),
		ProduceFailedAttempts: r.produceRetries.Load(),
		ProduceGaveUp:         r.produceGaveUp.Load(),
		ProduceSeconds:        produceTime.Seconds(),
		ProduceRecordsPerSec:  measure.Rate(r.produced.Load(), produceTime),
		ProduceMiBPerSec:      measure.MiBPerSecond(r.producedBytes.Load(), produceTime),
		ProduceLatency:        measure.Summarize(r.produceLat),
		BehindScheduleMs:      measure.Ms(time.Duration(r.behindNs.Load())),
	}
	if r.ledger == nil {
		return s
	}
	flowTime := measure.Span(first, r.lastAck.Load())
	acked := r.ledger.ackedCount()
	s.Consumers = r.cfg.consumers
	s.Consumed, s.Acked, s.Unacked = r.consumed.Load(), acked, r.ledger.unacked()
	s.AcksRefused, s.ConsumeErrors, s.Foreign = r.acksRefused.Load(), r.consumeErrors.Load(), r.foreign.Load()
	s.ConsumeSeconds = flowTime.Seconds()
	s.ConsumeRecordsPerSec = measure.Rate(acked, flowTime)
	s.ConsumeMiBPerSec = measure.MiBPerSecond(r.ackedBytes.Load(), flowTime)
	s.ConsumeLatency, s.AckLatency, s.EndToEndLatency = measure.Summarize(r.consumeLat), measure.Summarize(r.ackLat), measure.Summarize(r.e2eLat)
	return s
}

// ledger keeps two bits for each record of a run: produced (answered 202)
// and acked. Both bits of a record share a word, so one atomic OR sees the
// other bit as it was: whichever of the 202 and the ack is recorded second
// settles the record, and pending counts the records produced and not yet
// acked exactly, though an ack may come back before its produce's 202.
type ledger struct {
	words   []atomic.Uint64
	pend    atomic.Int64
	ackedN  atomic.Int64 // distinct records acked
	records int64
}

func newLedger(records int64) *ledger {
	return &ledger{words: make([]atomic.Uint64, (records+31)/32), records: records}
}

// bitsOf is record n's word and its produced bit; the acked bit is the
// next one up.
func (l *ledger) bitsOf(n int64) (*atomic.Uint64, uint64) {
	i := n - 1
	return &l.words[i/32], 1 << (2 * (i % 32))
}

func (l *ledger) produced(n int64) {
	w, p := l.bitsOf(n)
	if old := w.Or(p); old&p == 0 && old&(p<<1) == 0 {
		l.pend.Add(1)
	}
}

// acked records n's ack and reports whether it is the first.
func (l *ledger) acked(n int64) bool {
	w, p := l.bitsOf(n)
	old := w.Or(p << 1)
	if old&(p<<1) != 0 {
		return false
	}
	if old&p != 0 {
		l.pend.Add(-1)
	}
	l.ackedN.Add(1)
	return true
}

// pending is how many records were produced and not acked yet; a nil
// ledger has none.
func (l *ledger) pending() int64 {
	if l == nil {
		return 0
	}
	return l.pend.Load()
}

func (l *ledger) ackedCount() int64 { return l.ackedN.Load() }

// unacked counts, once the workers are done, the records produced and
// never acked (a scan, exact where pending may lag a racing worker).
func (l *ledger) unacked() int64 {
	var n int64
	const produced = 0x5555555555555555 // the low bit of every pair
	for i := range l.words {
		w := l.words[i].Load()
		n += int64(bits.OnesCount64(w & produced &^ (w >> 1)))
	}
	return n
}
