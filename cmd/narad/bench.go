package main

// narad bench: produce (and with --consume, consume and ack) a given number
// of records against any cluster and print what it measured. The flags
// become a benchConfig (Validate holds its bounds), runBench checks the
// topic and hands the run to bench_run.go's workers, and benchSummary is
// what it prints. The figures are defined in cmd/narad/measure, which
// bench/load uses too, so the two agree for the same settings.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/cmd/narad/measure"
	"github.com/naradmq/narad/messages"
)

const benchUsage = `usage: narad bench [flags]

Produce --count records of --size bytes to --topic with --concurrency
producers, held to --rate records a second over all of them (0: as fast as
they go), and print the throughput (records/s, MiB/s) and the produce
latency (p50, p95, p99, max). With --consume, --consumers consume and ack
the records as they arrive, and it prints the consume, ack and end-to-end
(produce start to delivery) latencies too. A progress line shows on
standard error while it runs (redrawn in place on a terminal, a line every
2 s otherwise); Ctrl-C stops the run and prints what it measured so far.

It measures as bench/load does (cmd/narad/measure), so the two give the same
figures for the same settings. It exits 1 when fewer records were produced
than asked, or, with --consume, when some were not acked within --drain.

The topic must exist, or --create makes it. With --consume, every record
the topic serves is consumed and acked, the run's own and any other's
(counted as foreign): bench a topic of its own, not one with data you need.

Flags:
  --server URL[,URL...]  broker URL, or several nodes of one cluster, comma-
                         separated: producer i and consumer i use node i mod n
                         (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME            username for HTTP Basic (default $NARAD_USER)
  --password PW          its password (default $NARAD_PASSWORD)
  --context NAME         saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --topic NAME           topic to produce to (default bench)
  --create               create the topic first; an existing one is used as it is
  --partitions N         with --create: its partitions (default 12)
  --count N              records to produce (default 10000, at most 100000000)
  --size BYTES           bytes a record (default 1024; 62 to 1 MiB: a record
                         carries its id and send time)
  --concurrency N        concurrent producers (default 8, at most 1024)
  --rate N               records a second over all producers (default 0: as
                         fast as possible; at most 10000000)
  --batch N              records a producer sends in one request (default 1:
                         the contract's produce route; 2 to 1000 through the
                         batch route, at most 8 MiB a request)
  --consume              consume and ack the records too
  --consumers N          with --consume: concurrent consumers (default --concurrency)
  --wait DURATION        with --consume: the consume long-poll (default 1s, at most 30s)
  --drain DURATION       with --consume: once producing ends, how long the rest
                         may take to be acked (default 30s, at most 1h)
  --json                 print the summary as one JSON object on standard
                         output (the text summary goes to standard error)
`

// Bounds of a bench run, each checked in Validate.
const (
	// benchMaxCount bounds --count: with --consume a run keeps two bits a
	// record (25 MiB at the bound), and an id has room for 9 digits.
	benchMaxCount = 100_000_000
	// benchMaxWorkers bounds --concurrency and --consumers: each worker
	// keeps a connection to a node; more than this from one process
	// measures the process, not the cluster.
	benchMaxWorkers = 1024
	// benchMaxWait is the contract's fallback cap on a consume long-poll.
	benchMaxWait = 30 * time.Second
	// benchMaxDrain bounds how long a run waits for its last acks.
	benchMaxDrain = time.Hour
	// benchRequestTimeout bounds one request beyond its long-poll wait, as
	// the load driver's does, so that a node that stops answering cannot
	// hold a worker past the run's bounds.
	benchRequestTimeout = 10 * time.Second
	// benchMaxBatch and benchMaxBatchBytes are the batch route's default
	// caps on one request (records, body bytes): a larger batch would be
	// refused whole by a broker on its defaults.
	benchMaxBatch      = 1000
	benchMaxBatchBytes = 8 << 20
	// benchBatchEnvelopeBytes bounds what the batch route's JSON adds to a
	// record's body ({"body":...} and a comma).
	benchBatchEnvelopeBytes = 32
	// benchIDDigits is the width of a record's number in its id.
	benchIDDigits = 9
)

// benchIDLen is the length of a record id: the run id ("b" and 8 hex
// digits), a dash and the record's number.
const benchIDLen = 9 + 1 + benchIDDigits

// benchMinSize is the smallest --size a record can be exactly: its id and
// send time must fit (measure.MakeBody).
var benchMinSize = measure.BodyOverhead(benchIDLen)

var (
	// errBenchTopicMissing: the topic does not exist and --create was not
	// given.
	errBenchTopicMissing = errors.New("topic does not exist")
	// errBenchShort: the run ended with fewer records produced, or acked,
	// than it was asked for.
	errBenchShort = errors.New("the run fell short")
)

// benchConfig is one run's settings, from the flags.
type benchConfig struct {
	// servers are the nodes' base URLs, at least one; workers are spread
	// over them round-robin.
	servers        []string
	user, password string
	topic          string
	create         bool
	partitions     int
	count          int64
	sizeBytes      int
	producers      int
	consumers      int
	// ratePerSecond holds the producers together to this many records a
	// second; 0 is as fast as they go.
	ratePerSecond float64
	// batch is how many records a producer sends in one request: 1 uses
	// the contract's produce route, more the batch route beside it.
	batch   int
	consume bool
	wait    time.Duration
	drain   time.Duration
	json    bool
	// redrawEvery is how often the progress line is redrawn on a
	// terminal, plainEvery how often a plain one is printed elsewhere.
	redrawEvery, plainEvery time.Duration
}

func defaultBenchConfig() benchConfig {
	return benchConfig{
		servers: []string{defaultServer}, topic: "bench", partitions: 12,
		count: 10000, sizeBytes: 1024, producers: 8, consumers: 8, batch: 1,
		wait: time.Second, drain: 30 * time.Second,
		redrawEvery: 250 * time.Millisecond, plainEvery: 2 * time.Second,
	}
}

// Validate holds a run to its bounds; each error names its flag.
func (c benchConfig) Validate() error {
	if err := checkServerList(c.servers); err != nil {
		return err
	}
	switch {
	case c.topic == "":
		return errors.New("--topic is empty")
	case c.partitions < 1:
		return fmt.Errorf("--partitions must be at least 1, got %d", c.partitions)
	case c.count < 1 || c.count > benchMaxCount:
		return fmt.Errorf("--count must be 1 to %d, got %d", benchMaxCount, c.count)
	case c.sizeBytes < benchMinSize || c.sizeBytes > maxMessageBytes:
		return fmt.Errorf("--size must be %d bytes (a record's id and send time) to %d (1 MiB, the broker's cap), got %d", benchMinSize, maxMessageBytes, c.sizeBytes)
	case c.producers < 1 || c.producers > benchMaxWorkers:
		return fmt.Errorf("--concurrency must be 1 to %d, got %d", benchMaxWorkers, c.producers)
	case c.consume && (c.consumers < 1 || c.consumers > benchMaxWorkers):
		return fmt.Errorf("--consumers must be 1 to %d, got %d", benchMaxWorkers, c.consumers)
	case c.ratePerSecond < 0 || c.ratePerSecond > measure.MaxRatePerSecond:
		return fmt.Errorf("--rate must be 0 (as fast as possible) to %d records a second, got %g", measure.MaxRatePerSecond, c.ratePerSecond)
	case c.batch < 1 || c.batch > benchMaxBatch:
		return fmt.Errorf("--batch must be 1 to %d, got %d", benchMaxBatch, c.batch)
	case c.batch*(c.sizeBytes+benchBatchEnvelopeBytes) > benchMaxBatchBytes:
		return fmt.Errorf("--batch %d of --size %d makes requests past the batch route's %d MiB: lower one", c.batch, c.sizeBytes, benchMaxBatchBytes>>20)
	case c.wait < 0 || c.wait > benchMaxWait:
		return fmt.Errorf("--wait must be 0 to %s, got %s", benchMaxWait, c.wait)
	case c.drain <= 0 || c.drain > benchMaxDrain:
		return fmt.Errorf("--drain must be more than 0 and at most %s, got %s", benchMaxDrain, c.drain)
	case c.redrawEvery <= 0 || c.plainEvery <= 0:
		return errors.New("progress intervals must be positive")
	}
	return nil
}

// splitServerList splits a --server value at commas; spaces around an
// entry are dropped, and an empty entry is a typo.
func splitServerList(list string) ([]string, error) {
	parts := strings.Split(list, ",")
	out := make([]string, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("--server %q: entry %d of %d is empty", list, i+1, len(parts))
		}
		out = append(out, p)
	}
	return out, nil
}

// checkServerList checks each server's URL and that none is named twice:
// a repeated node would skew the round-robin without saying so.
func checkServerList(servers []string) error {
	if len(servers) == 0 {
		return errors.New("--server is empty")
	}
	seen := map[string]int{}
	for i, s := range servers {
		u, err := client.ParseServer(s)
		if err == nil && u.Host == "" {
			err = fmt.Errorf("server url %q has no host", s)
		}
		if err != nil {
			return fmt.Errorf("--server: %w", err)
		}
		base := client.BaseURL(u)
		if j, ok := seen[base]; ok {
			return fmt.Errorf("--server: entries %d and %d are the same node %s", j+1, i+1, base)
		}
		seen[base] = i
	}
	return nil
}

// newBenchFlags binds bench's flags to c, whose values are the defaults;
// the server list is returned as typed, for splitServerList.
func newBenchFlags(c *benchConfig, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := newCommandFlags("bench", benchUsage, stderr)
	server := serverFlag(fs)
	fs.StringVar(&c.topic, "topic", c.topic, "topic")
	fs.BoolVar(&c.create, "create", false, "create the topic")
	fs.IntVar(&c.partitions, "partitions", c.partitions, "partitions with --create")
	fs.Int64Var(&c.count, "count", c.count, "records to produce")
	fs.IntVar(&c.sizeBytes, "size", c.sizeBytes, "bytes a record")
	fs.IntVar(&c.producers, "concurrency", c.producers, "concurrent producers")
	fs.Float64Var(&c.ratePerSecond, "rate", 0, "records a second, 0 as fast as possible")
	fs.IntVar(&c.batch, "batch", c.batch, "records a request")
	fs.BoolVar(&c.consume, "consume", false, "consume and ack too")
	fs.IntVar(&c.consumers, "consumers", 0, "concurrent consumers")
	fs.DurationVar(&c.wait, "wait", c.wait, "consume long-poll")
	fs.DurationVar(&c.drain, "drain", c.drain, "how long the last acks may take")
	fs.BoolVar(&c.json, "json", false, "JSON summary on stdout")
	return fs, server
}

// parseBenchFlags turns the command line (and the context and NARAD_*
// variables) into a benchConfig, valid or with an error naming the flag.
func parseBenchFlags(args []string, stderr io.Writer) (benchConfig, error) {
	c := defaultBenchConfig()
	fs, server := newBenchFlags(&c, stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return c, err
	}
	if len(pos) != 0 {
		return c, usageErr(fs, "unexpected arguments %q (the topic is --topic)", pos)
	}
	set := wasSet(fs)
	if !c.consume {
		for _, f := range []string{"consumers", "wait", "drain"} {
			if set[f] {
				return c, usageErr(fs, "--%s needs --consume", f)
			}
		}
	}
	if set["partitions"] && !c.create {
		return c, usageErr(fs, "--partitions needs --create (an existing topic keeps its partitions)")
	}
	if !set["consumers"] {
		c.consumers = c.producers
	}
	if err := applyContext(fs); err != nil {
		return c, fmt.Errorf("bench: %w", err)
	}
	if c.servers, err = splitServerList(*server); err != nil {
		return c, usageErr(fs, "%v", err)
	}
	c.user, c.password = credentials(fs)
	if err := c.Validate(); err != nil {
		return c, usageErr(fs, "%v", err)
	}
	return c, nil
}

// runBench is `narad bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	bs := make([]*client.Broker, 0, len(cfg.servers))
	defer func() {
		for _, b := range bs {
			b.Close()
		}
	}()
	for _, s := range cfg.servers {
		// Every worker keeps one connection busy: without as many idle
		// slots the transport would reopen connections and the run would
		// measure handshakes.
		b, err := client.New(s, client.Options{Conns: cfg.producers + cfg.consumers + 2, Timeout: benchRequestTimeout, User: cfg.user, Password: cfg.password})
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		bs = append(bs, b)
	}
	if err := benchTopic(ctx, bs[0], cfg, stderr); err != nil {
		return err
	}

	r := newBenchRun(cfg, bs)
	runErr := r.execute(ctx, stderr)
	s := r.summarize(ctx.Err() != nil)
	text := stdout
	if cfg.json {
		text = stderr
	}
	s.writeText(text)
	if cfg.json {
		if err := json.NewEncoder(stdout).Encode(s); err != nil {
			return fmt.Errorf("bench: write json summary: %w", err)
		}
	}
	switch {
	case runErr != nil:
		return fmt.Errorf("bench: %w", runErr)
	case ctx.Err() != nil:
		return fmt.Errorf("bench: interrupted: %w", ctx.Err())
	case s.Produced < cfg.count:
		return fmt.Errorf("bench: %w: %d of %d records produced (%d given up after retries)", errBenchShort, s.Produced, cfg.count, s.ProduceGaveUp)
	case cfg.consume && s.Unacked > 0:
		return fmt.Errorf("bench: %w: %d of the %d records produced were not acked within --drain %s", errBenchShort, s.Unacked, s.Produced, cfg.drain)
	}
	return nil
}

// benchTopic makes sure the topic exists: --create makes it (an existing
// one is used as it is, and said so), otherwise a missing one is an error
// that says how to get one.
func benchTopic(ctx context.Context, b *client.Broker, cfg benchConfig, stderr io.Writer) error {
	if cfg.create {
		_, err := b.CreateTopic(ctx, messages.CreateTopicRequest{Name: cfg.topic, Partitions: cfg.partitions})
		switch {
		case client.IsStatus(err, 409):
			fmt.Fprintf(stderr, "bench: topic %s exists; using it as it is\n", cfg.topic)
		case err != nil:
			return fmt.Errorf("bench: create topic %s: %w", cfg.topic, err)
		}
		return nil
	}
	_, err := b.GetTopic(ctx, cfg.topic)
	switch {
	case client.IsStatus(err, 404):
		return fmt.Errorf("bench: %w: %q at %s; give --create to make it (with --partitions N), or name an existing one with --topic", errBenchTopicMissing, cfg.topic, cfg.servers[0])
	case err != nil:
		return fmt.Errorf("bench: topic %s: %w", cfg.topic, err)
	}
	return nil
}

// benchSummary is what a run reports; --json prints it as one object.
type benchSummary struct {
	Topic         string   `json:"topic"`
	RunID         string   `json:"run_id"`
	Servers       []string `json:"servers"`
	Count         int64    `json:"count"`
	RecordBytes   int      `json:"record_bytes"`
	Producers     int      `json:"producers"`
	Batch         int      `json:"batch"`     // records a produce request
	Consumers     int      `json:"consumers"` // 0 without --consume
	RatePerSecond float64  `json:"rate_per_sec"`
	Interrupted   bool     `json:"interrupted"`

	Produced              int64             `json:"produced"`
	ProducedBytes         int64             `json:"produced_bytes"`
	ProduceFailedAttempts int64             `json:"produce_failed_attempts"`
	ProduceGaveUp         int64             `json:"produce_gave_up"`
	ProduceSeconds        float64           `json:"produce_seconds"`
	ProduceRecordsPerSec  float64           `json:"produce_records_per_sec"`
	ProduceMiBPerSec      float64           `json:"produce_mib_per_sec"`
	ProduceLatency        measure.Latencies `json:"produce_latency"`
	// BehindScheduleMs is how late the last record went out against
	// --rate's schedule: a run the cluster could not keep up with.
	BehindScheduleMs float64 `json:"behind_schedule_ms"`

	// With --consume: deliveries of this run's records, the distinct ones
	// acked, and the produced ones never acked.
	Consumed      int64 `json:"consumed"`
	Acked         int64 `json:"acked"`
	Unacked       int64 `json:"unacked"`
	AcksRefused   int64 `json:"acks_refused"`
	ConsumeErrors int64 `json:"consume_errors"`
	Foreign       int64 `json:"foreign"`
	// The consume figures run from the first produce to the last ack, the
	// load driver's "full flow".
	ConsumeSeconds       float64           `json:"consume_seconds"`
	ConsumeRecordsPerSec float64           `json:"consume_records_per_sec"`
	ConsumeMiBPerSec     float64           `json:"consume_mib_per_sec"`
	ConsumeLatency       measure.Latencies `json:"consume_latency"`
	AckLatency           measure.Latencies `json:"ack_latency"`
	EndToEndLatency      measure.Latencies `json:"end_to_end_latency"`
}

func (s benchSummary) writeText(w io.Writer) {
	var b strings.Builder
	rate := "as fast as possible"
	if s.RatePerSecond > 0 {
		rate = fmt.Sprintf("at %g records/s", s.RatePerSecond)
	}
	consumers := ""
	if s.Consumers > 0 {
		consumers = fmt.Sprintf(", %d consumers", s.Consumers)
	}
	fmt.Fprintf(&b, "bench: %d records of %d bytes to topic %s, %d producers (%d records a request)%s, %s, %d node(s), run %s\n",
		s.Count, s.RecordBytes, s.Topic, s.Producers, s.Batch, consumers, rate, len(s.Servers), s.RunID)
	if s.Interrupted {
		b.WriteString("interrupted: the figures below cover the run so far\n")
	}
	lat := func(l measure.Latencies) string {
		return fmt.Sprintf("p50 %s  p95 %s  p99 %s  max %s", measure.FmtMs(l.P50Ms), measure.FmtMs(l.P95Ms), measure.FmtMs(l.P99Ms), measure.FmtMs(l.MaxMs))
	}
	fmt.Fprintf(&b, "produce:      %d records in %.2fs: %.0f records/s, %.2f MiB/s (%d failed attempts, %d given up)\n",
		s.Produced, s.ProduceSeconds, s.ProduceRecordsPerSec, s.ProduceMiBPerSec, s.ProduceFailedAttempts, s.ProduceGaveUp)
	fmt.Fprintf(&b, "  latency     %s\n", lat(s.ProduceLatency))
	if s.RatePerSecond > 0 {
		fmt.Fprintf(&b, "  the last record went out %s behind --rate's schedule\n", measure.FmtMs(s.BehindScheduleMs))
	}
	if s.Consumers > 0 {
		fmt.Fprintf(&b, "consume+ack:  %d acked in %.2fs: %.0f records/s, %.2f MiB/s (first produce to last ack)\n",
			s.Acked, s.ConsumeSeconds, s.ConsumeRecordsPerSec, s.ConsumeMiBPerSec)
		fmt.Fprintf(&b, "  %d deliveries, %d not acked, %d acks refused, %d consume errors, %d foreign records acked\n",
			s.Consumed, s.Unacked, s.AcksRefused, s.ConsumeErrors, s.Foreign)
		fmt.Fprintf(&b, "  consume     %s (the consumes that delivered)\n", lat(s.ConsumeLatency))
		fmt.Fprintf(&b, "  ack         %s\n", lat(s.AckLatency))
		fmt.Fprintf(&b, "  end-to-end  %s (produce start to delivery)\n", lat(s.EndToEndLatency))
	}
	io.WriteString(w, b.String())
}
