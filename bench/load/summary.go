package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/cmd/narad/measure"
)

// summary is what a run reports; -json prints it as one object.
type summary struct {
	Topic     string   `json:"topic"`
	RunID     string   `json:"run_id"`
	Servers   []string `json:"servers"`
	Producers int      `json:"producers"`
	// Batch is the records a producer sent in one request (-batch).
	Batch        int  `json:"batch"`
	Consumers    int  `json:"consumers"`
	MessageBytes int  `json:"message_bytes"`
	Interrupted  bool `json:"interrupted"`

	Produced          int64   `json:"produced"`
	ProducedBytes     int64   `json:"produced_bytes"`
	ProduceFailures   int64   `json:"produce_failed_attempts"`
	ProduceGaveUp     int64   `json:"produce_gave_up"`
	ProduceSeconds    float64 `json:"produce_seconds"`
	ProduceMsgsPerSec float64 `json:"produce_msgs_per_sec"`
	ProduceMiBPerSec  float64 `json:"produce_mib_per_sec"`

	Deliveries     int64   `json:"deliveries"`
	Acked          int64   `json:"acked"`
	AcksRefused    int64   `json:"acks_refused"`
	ConsumeErrors  int64   `json:"consume_errors"`
	Foreign        int64   `json:"foreign"`
	FlowSeconds    float64 `json:"flow_seconds"`
	FlowMsgsPerSec float64 `json:"flow_msgs_per_sec"`
	// AckedWhileProducing counts the acks taken before every producer
	// returned; ConsumeAckMsgsPerSec is that over ProduceSeconds, the
	// rate to hold against ProduceMsgsPerSec: a queue whose consumers keep
	// up acks about as fast as it is produced to.
	AckedWhileProducing  int64   `json:"acked_while_producing"`
	ConsumeAckMsgsPerSec float64 `json:"consume_ack_msgs_per_sec"`
	// The run's bounds in unix ns (0 when there was none), so that the
	// runs of several load processes against one cluster at once can be
	// added up over their common wall time.
	FirstProduceUnixNs int64 `json:"first_produce_unix_ns"`
	LastProduceUnixNs  int64 `json:"last_produce_unix_ns"`
	LastAckUnixNs      int64 `json:"last_ack_unix_ns"`

	ProduceLatency  measure.Latencies `json:"produce_latency"`
	EndToEndLatency measure.Latencies `json:"end_to_end_latency"`
	// EndToEndWhileProducing is EndToEndLatency of the deliveries made
	// before every producer returned.
	EndToEndWhileProducing measure.Latencies `json:"end_to_end_latency_while_producing"`
	// ConsumeLatency is the round trip of the consumes that delivered,
	// AckLatency that of each ack's first try: together a consumer's turn,
	// to hold against ProduceLatency when consumers fall behind.
	ConsumeLatency measure.Latencies `json:"consume_latency"`
	AckLatency     measure.Latencies `json:"ack_latency"`
	Watermarks     string            `json:"watermarks"`
	History        historyJSON       `json:"history"`
	historyReport  history.Report
}

type historyJSON struct {
	OK               bool     `json:"ok"`
	Produced         int      `json:"produced"`
	MaybeProduced    int      `json:"maybe_produced"`
	Consumed         int      `json:"consumed"`
	Lost             int      `json:"lost"`
	LostSample       []string `json:"lost_sample,omitempty"`
	Duplicates       int      `json:"duplicates"`
	DuplicateRecords int      `json:"duplicate_records"`
	Phantoms         int      `json:"phantoms"`
	OffsetConflicts  int      `json:"offset_conflicts"`
	BeyondWatermark  int      `json:"beyond_watermark"`
}

// lostSample bounds the lost ids put in the JSON summary.
const lostSample = 20

func (l *loadRun) summarize(lat samples, watermarks string, interrupted bool) summary {
	first := l.firstProduce.Load()
	produceTime := measure.Span(first, l.lastProduceEnd.Load())
	flowTime := measure.Span(first, l.lastAck.Load())
	r := l.hist.Check()
	s := summary{
		Topic:        l.cfg.topic,
		RunID:        l.runID,
		Servers:      l.cfg.servers,
		Producers:    l.cfg.producers,
		Batch:        l.cfg.batch,
		Consumers:    l.cfg.consumers,
		MessageBytes: l.cfg.size,
		Interrupted:  interrupted,

		Produced:          l.produced.Load(),
		ProducedBytes:     l.producedBytes.Load(),
		ProduceFailures:   l.produceRetries.Load(),
		ProduceGaveUp:     l.produceGaveUp.Load(),
		ProduceSeconds:    produceTime.Seconds(),
		ProduceMsgsPerSec: measure.Rate(l.produced.Load(), produceTime),
		ProduceMiBPerSec:  measure.MiBPerSecond(l.producedBytes.Load(), produceTime),

		Deliveries:     l.deliveries.Load(),
		Acked:          l.acked.Load(),
		AcksRefused:    l.leaseLost.Load(),
		ConsumeErrors:  l.consumeErrors.Load(),
		Foreign:        l.foreign.Load(),
		FlowSeconds:    flowTime.Seconds(),
		FlowMsgsPerSec: measure.Rate(l.acked.Load(), flowTime),

		AckedWhileProducing:  l.ackedWhileProducing.Load(),
		ConsumeAckMsgsPerSec: measure.Rate(l.ackedWhileProducing.Load(), produceTime),
		FirstProduceUnixNs:   first,
		LastProduceUnixNs:    l.lastProduceEnd.Load(),
		LastAckUnixNs:        l.lastAck.Load(),

		ProduceLatency:  measure.Summarize(lat.produce),
		EndToEndLatency: measure.Summarize(lat.e2e),

		EndToEndWhileProducing: measure.Summarize(lat.e2eProducing),
		ConsumeLatency:         measure.Summarize(lat.consume),
		AckLatency:             measure.Summarize(lat.ack),
		Watermarks:             watermarks,
		History: historyJSON{
			OK:               r.OK(),
			Produced:         r.Produced,
			MaybeProduced:    r.MaybeProduced,
			Consumed:         r.Consumed,
			Lost:             len(r.Lost),
			LostSample:       r.Lost[:min(len(r.Lost), lostSample)],
			Duplicates:       r.Duplicates,
			DuplicateRecords: r.DuplicateRecords,
			Phantoms:         r.UnknownConsumed,
			OffsetConflicts:  r.OffsetConflicts,
			BeyondWatermark:  r.BeyondWatermark,
		},
		historyReport: r,
	}
	return s
}

func (s summary) writeText(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "load: topic %s, run %s, %d producers (%d records a request), %d consumers, %d-byte messages\n",
		s.Topic, s.RunID, s.Producers, s.Batch, s.Consumers, s.MessageBytes)
	if len(s.Servers) > 1 {
		fmt.Fprintf(&b, "servers:            %d, workers round-robin: %s\n", len(s.Servers), strings.Join(s.Servers, " "))
	}
	if s.Interrupted {
		b.WriteString("interrupted: the figures below cover the run so far\n")
	}
	fmt.Fprintf(&b, "produce:            %d msgs in %.2fs: %.0f msgs/s, %.2f MiB/s (%d failed attempts, %d given up)\n",
		s.Produced, s.ProduceSeconds, s.ProduceMsgsPerSec, s.ProduceMiBPerSec, s.ProduceFailures, s.ProduceGaveUp)
	fmt.Fprintf(&b, "full flow:          %d acked in %.2fs: %.0f msgs/s (first produce to last ack)\n",
		s.Acked, s.FlowSeconds, s.FlowMsgsPerSec)
	fmt.Fprintf(&b, "while producing:    %d acked: %.0f msgs/s (%.2f of the produce rate)\n",
		s.AckedWhileProducing, s.ConsumeAckMsgsPerSec, ratioOf(s.ConsumeAckMsgsPerSec, s.ProduceMsgsPerSec))
	fmt.Fprintf(&b, "consume:            %d deliveries, %d acks refused, %d consume errors, %d foreign messages acked\n",
		s.Deliveries, s.AcksRefused, s.ConsumeErrors, s.Foreign)
	fmt.Fprintf(&b, "produce latency:    p50 %s  p95 %s  p99 %s  max %s\n",
		measure.FmtMs(s.ProduceLatency.P50Ms), measure.FmtMs(s.ProduceLatency.P95Ms), measure.FmtMs(s.ProduceLatency.P99Ms), measure.FmtMs(s.ProduceLatency.MaxMs))
	fmt.Fprintf(&b, "consume latency:    p50 %s  p95 %s  p99 %s  max %s (the consumes that delivered)\n",
		measure.FmtMs(s.ConsumeLatency.P50Ms), measure.FmtMs(s.ConsumeLatency.P95Ms), measure.FmtMs(s.ConsumeLatency.P99Ms), measure.FmtMs(s.ConsumeLatency.MaxMs))
	fmt.Fprintf(&b, "ack latency:        p50 %s  p95 %s  p99 %s  max %s\n",
		measure.FmtMs(s.AckLatency.P50Ms), measure.FmtMs(s.AckLatency.P95Ms), measure.FmtMs(s.AckLatency.P99Ms), measure.FmtMs(s.AckLatency.MaxMs))
	fmt.Fprintf(&b, "end-to-end latency: p50 %s  p95 %s  p99 %s  max %s (produce start to delivery)\n",
		measure.FmtMs(s.EndToEndLatency.P50Ms), measure.FmtMs(s.EndToEndLatency.P95Ms), measure.FmtMs(s.EndToEndLatency.P99Ms), measure.FmtMs(s.EndToEndLatency.MaxMs))
	fmt.Fprintf(&b, "  while producing:  p50 %s  p95 %s  p99 %s  max %s (%d deliveries)\n",
		measure.FmtMs(s.EndToEndWhileProducing.P50Ms), measure.FmtMs(s.EndToEndWhileProducing.P95Ms), measure.FmtMs(s.EndToEndWhileProducing.P99Ms), measure.FmtMs(s.EndToEndWhileProducing.MaxMs), s.EndToEndWhileProducing.Count)
	fmt.Fprintf(&b, "high watermarks:    %s\n", s.Watermarks)
	b.WriteString(s.historyReport.String())
	b.WriteString("\n")
	io.WriteString(w, b.String())
}

// ratioOf is a/b, or 0 when b is not positive.
func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}
