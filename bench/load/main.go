// Command load drives a Narad broker over its HTTP API with concurrent
// producers and consumers, then checks with bench/history that every
// accepted message came back:
//
//	go run ./bench/load -server http://127.0.0.1:7942 -topic load -create \
//	    -producers 8 -consumers 8 -count 100000 -size 1024 -duration 60s
//
// -server may list several nodes of one cluster, comma-separated:
//
//	go run ./bench/load -create \
//	    -server http://127.0.0.1:7942,http://127.0.0.1:7943,http://127.0.0.1:7944
//
// Producer i then talks to server i mod n and consumer j to server j mod n
// (a consumer acks on the node that served the message); the topic is
// created on, and its high watermarks read from, the first server.
//
// Producers stop at -count messages or after -duration, whichever comes
// first. Consumers pull with a 1 s long-poll and ack every message; once the
// producers stop they keep going until every accepted message was consumed,
// or -drain passes. Then it prints throughput, latencies and the history
// report, and exits 1 when the history shows a loss, a phantom message, a
// reused offset or a delivery past a high watermark.
//
// Message ids carry a per-run prefix, so leftovers of an earlier run on the
// same topic are acked and counted as foreign instead of being reported as
// phantoms. The driver only targets loopback addresses.
//
// Start with run in main.go: it makes one client per -server (broker.go,
// over cmd/narad/client), execute runs the producer and consumer workers
// against them, and summarize (summary.go) turns what the workers counted
// and the bench/history check into the report. progress.go draws the live
// line. The latency figures, rates, pacing and the record body are
// cmd/narad/measure's, which `narad bench` uses too: the two report the same
// numbers for the same settings.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/cmd/narad/measure"
	"github.com/naradmq/narad/messages"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

type config struct {
	// servers are the broker base URLs, at least one, each a loopback
	// address; workers are spread over them round-robin.
	servers    []string
	topic      string
	producers  int
	consumers  int
	count      int
	size       int
	duration   time.Duration
	partitions int
	create     bool
	drain      time.Duration
	wait       time.Duration
	// batch is how many records a producer sends in one request: 1 (or 0)
	// uses the contract's produce route, more the batch route beside it.
	batch int
	// ratePerSecond holds the producers together to this many records a
	// second (measure.Pacer); 0 is as fast as they go.
	ratePerSecond float64
	json          bool
	// user and password are sent as HTTP Basic credentials when user is
	// set.
	user, password string
	// progressEvery is how often the progress line is redrawn.
	progressEvery time.Duration
}

const usageText = `usage: go run ./bench/load [flags]

Produce and consume over HTTP against a broker on a loopback address, then
report throughput, latencies and the history check (exit status 1 when it
fails). Producing stops at -count messages or after -duration, whichever
comes first; consuming then drains for at most -drain.

-server takes one URL or a comma-separated list of the nodes of one cluster:
producer i uses server i mod n, consumer j server j mod n, and the topic is
created on the first.

Flags:
`

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	server := "http://127.0.0.1:7942"
	if v := os.Getenv("NARAD_SERVER"); v != "" {
		server = v
	}
	var c config
	fs.StringVar(&server, "server", server, "broker URL, or a comma-separated list of a cluster's node URLs; loopback addresses only (default from $NARAD_SERVER when set)")
	fs.StringVar(&c.topic, "topic", "load", "topic to produce to and consume from")
	fs.IntVar(&c.producers, "producers", 8, "concurrent producers")
	fs.IntVar(&c.consumers, "consumers", 8, "concurrent consumers")
	fs.IntVar(&c.count, "count", 100000, "messages to produce at most")
	fs.IntVar(&c.size, "size", 1024, "message body size in bytes (at least the id and timestamp fit)")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "produce for at most this long")
	fs.IntVar(&c.partitions, "partitions", 12, "partitions of the topic when -create makes it")
	fs.BoolVar(&c.create, "create", false, "create the topic first (an existing topic is used as it is)")
	fs.DurationVar(&c.drain, "drain", 30*time.Second, "after producing stops, consume for at most this long")
	fs.DurationVar(&c.wait, "wait", time.Second, "consume long-poll wait")
	fs.IntVar(&c.batch, "batch", 1, "records a producer sends in one request: 1 through the contract's produce route, 2 to 1000 through the batch route")
	fs.Float64Var(&c.ratePerSecond, "rate", 0, "records a second over all producers together; 0 is as fast as possible")
	fs.StringVar(&c.user, "user", os.Getenv("NARAD_USER"), "user for HTTP Basic authentication, for a broker with security on (default from $NARAD_USER)")
	fs.StringVar(&c.password, "password", os.Getenv("NARAD_PASSWORD"), "that user's password (default from $NARAD_PASSWORD)")
	fs.BoolVar(&c.json, "json", false, "print the summary as one JSON object on stdout (the text summary goes to stderr)")
	c.progressEvery = 250 * time.Millisecond
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	servers, err := parseServers(server)
	if err != nil {
		return c, err
	}
	c.servers = servers
	return c, c.validate()
}

// parseServers splits a -server value at commas. Spaces around an entry
// are dropped; an empty entry is an error (a typo). validate checks the
// entries themselves (checkServers).
func parseServers(list string) ([]string, error) {
	parts := strings.Split(list, ",")
	servers := make([]string, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			if len(parts) == 1 {
				return nil, errors.New("-server is empty")
			}
			return nil, fmt.Errorf("-server %q: entry %d of %d is empty", list, i+1, len(parts))
		}
		servers = append(servers, p)
	}
	return servers, nil
}

// checkServers checks every server with checkLoopback, and that no two are
// the same server (client.BaseURL): a repeated URL is a typo, and would skew
// the round-robin without saying so. Of several servers, an error names the
// entry.
func checkServers(servers []string) error {
	seen := make(map[string]int, len(servers))
	for i, s := range servers {
		u, err := checkLoopback(s)
		if err != nil {
			if len(servers) == 1 {
				return err
			}
			return fmt.Errorf("-server entry %d of %d: %w", i+1, len(servers), err)
		}
		base := client.BaseURL(u)
		if j, ok := seen[base]; ok {
			return fmt.Errorf("-server %q: entries %d and %d are the same server %s", strings.Join(servers, ","), j+1, i+1, base)
		}
		seen[base] = i
	}
	return nil
}

func (c config) validate() error {
	if len(c.servers) == 0 {
		return errors.New("-server is empty")
	}
	if err := checkServers(c.servers); err != nil {
		return err
	}
	switch {
	case c.topic == "":
		return errors.New("-topic is empty")
	case c.producers < 1 || c.consumers < 1:
		return errors.New("-producers and -consumers must be at least 1")
	case c.count < 1:
		return errors.New("-count must be at least 1")
	case c.size < 1 || c.size > 1<<20:
		return errors.New("-size must be 1 byte to 1 MiB")
	case c.duration <= 0 || c.drain <= 0:
		return errors.New("-duration and -drain must be positive")
	case c.wait < 0:
		return errors.New("-wait must not be negative")
	case c.create && c.partitions < 1:
		return errors.New("-partitions must be at least 1")
	case c.progressEvery <= 0:
		return errors.New("progress interval must be positive")
	case c.batch < 0 || c.batch > 1000:
		return errors.New("-batch must be 1 to 1000 (0 is 1)")
	case c.ratePerSecond < 0 || c.ratePerSecond > measure.MaxRatePerSecond:
		return fmt.Errorf("-rate must be 0 (as fast as possible) to %d records a second", measure.MaxRatePerSecond)
	}
	return nil
}

// errHistory is returned when the run completed but the history check
// failed.
var errHistory = errors.New("history check failed")

// loadRun is the shared state of one run. Workers only touch atomics and
// the history (which locks itself); latencies stay per worker.
type loadRun struct {
	cfg config
	// bs has one client per server, in -server order: producer i uses
	// bs[i%len(bs)], consumer j bs[j%len(bs)], the topic's create and
	// stats bs[0].
	bs    []*client.Broker
	hist  *history.History
	runID string
	pad   []byte // 'x' * size, sliced for each body
	// pacer holds the producers to -rate; nil for as fast as possible.
	pacer *measure.Pacer

	next atomic.Int64 // last message number handed to a producer

	produced       atomic.Int64 // answered 202
	producedBytes  atomic.Int64
	produceRetries atomic.Int64 // failed attempts, retried or not
	produceGaveUp  atomic.Int64 // messages whose every attempt failed
	deliveries     atomic.Int64 // this run's messages delivered
	acked          atomic.Int64 // this run's messages acked
	leaseLost      atomic.Int64 // acks refused (410 or retries used up): redelivered later
	consumeErrors  atomic.Int64
	foreign        atomic.Int64 // messages of other runs, acked and ignored

	// producersDone is set once every producer returned: an ack or a
	// delivery before it happened while producing, which is what the
	// consume rate and end-to-end latency of a queue that keeps up are
	// about (once producing stops, draining a backlog is fast and would
	// hide a lag).
	producersDone       atomic.Bool
	ackedWhileProducing atomic.Int64

	firstProduce   atomic.Int64 // unix ns of the first produce's start
	lastProduceEnd atomic.Int64 // unix ns of the last 202
	lastAck        atomic.Int64 // unix ns of the last ack of this run's messages
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	bs := make([]*client.Broker, 0, len(cfg.servers))
	defer func() {
		for _, b := range bs {
			b.Close()
		}
	}()
	for _, server := range cfg.servers {
		b, err := newBroker(server, cfg.producers+cfg.consumers+2, cfg.user, cfg.password)
		if err != nil {
			return err
		}
		bs = append(bs, b)
	}
	b := bs[0]

	if cfg.create {
		_, err := b.CreateTopic(ctx, messages.CreateTopicRequest{Name: cfg.topic, Partitions: cfg.partitions})
		switch {
		case client.IsStatus(err, 409):
			fmt.Fprintf(stderr, "load: topic %s exists; using it\n", cfg.topic)
		case err != nil:
			return err
		}
	}

	l := &loadRun{cfg: cfg, bs: bs, hist: history.New(), runID: newRunID(), pad: measure.Pad(cfg.size), pacer: measure.NewPacer(cfg.ratePerSecond, time.Now())}
	samples, runErr := l.execute(ctx, stderr)

	// A high watermark read after the consumers stopped bounds every
	// offset they were served. Zero stats are skipped: in cluster mode a
	// partition whose owner's stats were not merged reads as zeros.
	watermarks := "checked"
	if ctx.Err() == nil {
		d, err := b.GetTopic(ctx, cfg.topic)
		if err != nil {
			watermarks = "not checked: " + err.Error()
		}
		for _, s := range d.PartitionStats {
			if s.HighWatermark > 0 {
				l.hist.HighWatermark(cfg.topic, s.Index, s.HighWatermark)
			}
		}
	} else {
		watermarks = "not checked: interrupted"
	}

	s := l.summarize(samples, watermarks, ctx.Err() != nil)
	text := stdout
	if cfg.json {
		text = stderr
	}
	s.writeText(text)
	if cfg.json {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(s); err != nil {
			return fmt.Errorf("write json summary: %w", err)
		}
	}
	switch {
	case runErr != nil:
		return runErr
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: %w", ctx.Err())
	case !s.History.OK:
		return errHistory
	}
	return nil
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "r" + hex.EncodeToString(b[:])
}

// samples are the latencies one run measured, one slice per worker (each
// worker appends to its own, so that measuring takes no lock).
type samples struct {
	produce [][]time.Duration
	// e2e is produce start to delivery; e2eProducing the same of the
	// deliveries made while producing.
	e2e, e2eProducing [][]time.Duration
	// consume is the round trip of a consume that delivered (a long poll
	// that found nothing measures the wait, not the broker); ack that of
	// an ack's first try.
	consume, ack [][]time.Duration
}

// consumerSamples are one consumer's latencies.
type consumerSamples struct {
	e2e, e2eProducing, consume, ack []time.Duration
}

// execute runs the producers and consumers to their end and returns their
// latency samples, and the first worker error if one stopped the run.
func (l *loadRun) execute(ctx context.Context, stderr io.Writer) (samples, error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	out := samples{produce: make([][]time.Duration, l.cfg.producers)}
	for _, s := range []*[][]time.Duration{&out.e2e, &out.e2eProducing, &out.consume, &out.ack} {
		*s = make([][]time.Duration, l.cfg.consumers)
	}
	producersDone := make(chan struct{})
	produceUntil := time.Now().Add(l.cfg.duration)

	progressCtx, stopProgress := context.WithCancel(context.Background())
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		l.progress(progressCtx, stderr, measure.IsTerminal(stderr))
	}()

	// Consume requests get their own context so that the long-polls still
	// open can be cut short once the drain is over (everything delivered,
	// or the drain deadline passed), instead of each waiting out its wait.
	// Acks keep runCtx: an ack must not be cut short.
	consumeCtx, stopConsuming := context.WithCancel(runCtx)
	defer stopConsuming()

	var producers, consumers sync.WaitGroup
	for i := range l.cfg.consumers {
		consumers.Go(func() {
			cs, err := l.consumer(runCtx, consumeCtx, i, stopConsuming, producersDone)
			out.e2e[i], out.e2eProducing[i], out.consume[i], out.ack[i] = cs.e2e, cs.e2eProducing, cs.consume, cs.ack
			if err != nil {
				cancel(err)
			}
		})
	}
	for i := range l.cfg.producers {
		producers.Go(func() {
			lat, err := l.producer(runCtx, i, produceUntil)
			out.produce[i] = lat
			if err != nil {
				cancel(err)
			}
		})
	}
	producers.Wait()
	l.producersDone.Store(true)
	close(producersDone)
	drainTimer := time.AfterFunc(l.cfg.drain, stopConsuming)
	consumers.Wait()
	drainTimer.Stop()
	stopProgress()
	<-progressDone

	// A worker's error is the cause; the caller's own cancellation is
	// reported by the caller.
	if cause := context.Cause(runCtx); cause != nil && ctx.Err() == nil {
		return out, cause
	}
	return out, nil
}

// maxAttempts bounds the tries of one produce or ack that the broker
// answers with a retryable error.
const maxAttempts = 4

// producer sends messages until the count is used up, until is passed, or
// ctx is done. A produce answered 4xx ends the run: it will not get better.
func (l *loadRun) producer(ctx context.Context, index int, until time.Time) ([]time.Duration, error) {
	if l.cfg.batch > 1 {
		return l.batchProducer(ctx, index, until)
	}
	var lat []time.Duration
	for ctx.Err() == nil && time.Now().Before(until) {
		n := l.next.Add(1)
		if n > int64(l.cfg.count) {
			return lat, nil
		}
		if l.pacer.Wait(ctx, n) != nil {
			return lat, nil
		}
		id := fmt.Sprintf("%s-p%d-%07d", l.runID, index, n)
		start := time.Now()
		l.firstProduce.CompareAndSwap(0, start.UnixNano())
		// The body keeps the first attempt's time, so that end-to-end
		// latency includes the retries.
		body := measure.MakeBody(id, start.UnixNano(), l.cfg.size, l.pad)
		ok, err := l.produceOne(ctx, index, id, body)
		if err != nil {
			return lat, err
		}
		if ok {
			end := time.Now()
			lat = append(lat, end.Sub(start))
			l.produced.Add(1)
			l.producedBytes.Add(int64(len(body)))
			measure.RaiseTo(&l.lastProduceEnd, end.UnixNano())
		}
	}
	return lat, nil
}

// produceOne sends one message with bounded retries. The first attempt
// goes to the producer's own server (index mod n), each retry to the next
// one, so that a node that died or restarts under the load costs its
// producers one failed attempt a message rather than every attempt. It
// reports whether the broker answered 202; err is set only for an error
// that ends the run.
func (l *loadRun) produceOne(ctx context.Context, index int, id string, body []byte) (bool, error) {
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		b := l.bs[(index+attempt-1)%len(l.bs)]
		err := b.Produce(ctx, l.cfg.topic, body, "", nil)
		if err == nil {
			l.hist.Produced(id)
			return true, nil
		}
		// Anything but a 202 may or may not have stored the record.
		l.hist.ProduceFailed(id)
		l.produceRetries.Add(1)
		if ctx.Err() != nil {
			return false, nil
		}
		if !client.IsRetryable(err) {
			return false, fmt.Errorf("produce %s: %w", id, err)
		}
		client.Sleep(ctx, backoff(attempt))
	}
	l.produceGaveUp.Add(1)
	return false, nil
}

// batchProducer is producer through the batch route: -batch records a
// request (fewer at the end of the count). Each record is answered alone;
// the ones not accepted go again in the next attempt, to the next server,
// as produceOne's retries do; a record refused with a 4xx ends the run.
// Each accepted record's latency is its request's.
func (l *loadRun) batchProducer(ctx context.Context, index int, until time.Time) ([]time.Duration, error) {
	var lat []time.Duration
	for ctx.Err() == nil && time.Now().Before(until) {
		last := l.next.Add(int64(l.cfg.batch))
		first := last - int64(l.cfg.batch) + 1
		if first > int64(l.cfg.count) {
			return lat, nil
		}
		last = min(last, int64(l.cfg.count))
		if l.pacer.Wait(ctx, first) != nil {
			return lat, nil
		}
		start := time.Now()
		l.firstProduce.CompareAndSwap(0, start.UnixNano())
		ids := make([]string, 0, last-first+1)
		bodies := make([][]byte, 0, last-first+1)
		for n := first; n <= last; n++ {
			id := fmt.Sprintf("%s-p%d-%07d", l.runID, index, n)
			ids = append(ids, id)
			bodies = append(bodies, measure.MakeBody(id, start.UnixNano(), l.cfg.size, l.pad))
		}
		for attempt := 1; len(ids) > 0; attempt++ {
			if attempt > maxAttempts {
				l.produceGaveUp.Add(int64(len(ids)))
				break
			}
			recs := make([]messages.BatchRecord, len(bodies))
			for i, b := range bodies {
				recs[i] = client.BatchRecordOf("", nil, b)
			}
			out, err := l.bs[(index+attempt-1)%len(l.bs)].ProduceBatch(ctx, l.cfg.topic, recs)
			if err != nil {
				// Any record of a request that got no answer may be stored.
				for _, id := range ids {
					l.hist.ProduceFailed(id)
				}
				l.produceRetries.Add(int64(len(ids)))
				if ctx.Err() != nil {
					return lat, nil
				}
				if !client.IsRetryable(err) {
					return lat, fmt.Errorf("produce batch of %d: %w", len(ids), err)
				}
				client.Sleep(ctx, backoff(attempt))
				continue
			}
			end := time.Now()
			var againIDs []string
			var againBodies [][]byte
			for i, res := range out.Results {
				if res.Status == http.StatusAccepted {
					l.hist.Produced(ids[i])
					lat = append(lat, end.Sub(start))
					l.produced.Add(1)
					l.producedBytes.Add(int64(len(bodies[i])))
					continue
				}
				l.hist.ProduceFailed(ids[i])
				l.produceRetries.Add(1)
				if res.Status < 500 {
					return lat, fmt.Errorf("produce %s: %d %s", ids[i], res.Status, res.Error)
				}
				againIDs, againBodies = append(againIDs, ids[i]), append(againBodies, bodies[i])
			}
			measure.RaiseTo(&l.lastProduceEnd, end.UnixNano())
			ids, bodies = againIDs, againBodies
			if len(ids) > 0 {
				client.Sleep(ctx, backoff(attempt))
			}
		}
	}
	return lat, nil
}

// consumer pulls from its server (index mod n) and acks a message on the
// server that delivered it, until the producers are done and everything
// they got accepted was delivered (it then calls stopConsuming, which ends
// the other consumers' long-polls too), or until consumeCtx is done: the
// drain deadline passed or the run was stopped. Acks use ctx. After a
// failed consume it moves on to the next server, as producers do on a
// retry. It returns its latencies (consumerSamples).
func (l *loadRun) consumer(ctx, consumeCtx context.Context, index int, stopConsuming func(), producersDone <-chan struct{}) (cs consumerSamples, err error) {
	failures := 0
	server := index
	// The loop ends: producers end (count and duration bound them), then
	// the drain timer cancels consumeCtx; every request has a timeout.
	for consumeCtx.Err() == nil {
		select {
		case <-producersDone:
			if l.hist.Outstanding() == 0 {
				stopConsuming()
				return cs, nil
			}
		default:
		}
		b := l.bs[server%len(l.bs)]
		asked := time.Now()
		d, err := b.Consume(consumeCtx, l.cfg.topic, client.ConsumeOptions{Wait: l.cfg.wait})
		if err != nil {
			if consumeCtx.Err() != nil {
				return cs, nil
			}
			if !client.IsRetryable(err) {
				return cs, err
			}
			l.consumeErrors.Add(1)
			failures++
			server++
			client.Sleep(consumeCtx, backoff(failures))
			continue
		}
		failures = 0
		if d == nil {
			continue
		}
		received := time.Now()
		cs.consume = append(cs.consume, received.Sub(asked))
		id, sent, ok := measure.ParseBody(d.Payload)
		mine := ok && strings.HasPrefix(id, l.runID+"-")
		if mine {
			l.hist.Consumed(id, d.Topic, d.Partition, d.Offset)
			l.deliveries.Add(1)
			e2e := received.Sub(time.Unix(0, sent))
			cs.e2e = append(cs.e2e, e2e)
			if !l.producersDone.Load() {
				cs.e2eProducing = append(cs.e2eProducing, e2e)
			}
		} else {
			l.foreign.Add(1)
		}
		acked, took, err := l.ackOne(ctx, b, d)
		cs.ack = append(cs.ack, took)
		if err != nil {
			return cs, err
		}
		// A message whose ack failed is not recorded as acked: its
		// redelivery will be.
		if acked && mine {
			l.hist.Acked(id)
			l.acked.Add(1)
			if !l.producersDone.Load() {
				l.ackedWhileProducing.Add(1)
			}
			measure.RaiseTo(&l.lastAck, time.Now().UnixNano())
		}
	}
	return cs, nil
}

// ackOne acks d on b (client.AckRetrying) and reports whether the broker
// took the ack, and how long its first try took. A 410 or the tries
// running out (the message will be delivered again) is counted, not fatal.
func (l *loadRun) ackOne(ctx context.Context, b *client.Broker, d *messages.MessageInfo) (acked bool, first time.Duration, err error) {
	out, err := b.AckRetrying(ctx, l.cfg.topic, d.ReceiptHandle, maxAttempts)
	if out.Lost {
		l.leaseLost.Add(1)
	}
	if err != nil {
		return false, out.First, fmt.Errorf("ack %d@%d: %w", d.Partition, d.Offset, err)
	}
	return out.Acked, out.First, nil
}

// backoff doubles from 50 ms per attempt, capped at 1 s.
func backoff(attempt int) time.Duration {
	return client.Backoff(attempt, 50*time.Millisecond, time.Second)
}
