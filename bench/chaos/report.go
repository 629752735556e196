package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// beforeFaults is where a duplicate delivered before the first fault
// counts.
const beforeFaults = "none"

// summary is what a run prints: as text, or as JSON with -json.
type summary struct {
	Seed uint64 `json:"seed"`
	// Replay is the command line that replays the run's schedule.
	Replay string `json:"replay"`
	// Kinds are the run's -faults, the columns of DuplicatesByFault.
	Kinds []Kind `json:"kinds"`
	// Schedule is the faults as planned, Ran as thrown (the last may be
	// missing when the run stopped early).
	Schedule []Fault `json:"schedule"`
	Ran      []ran   `json:"ran"`

	Produced      int `json:"produced"`
	MaybeProduced int `json:"maybe_produced"`
	Consumed      int `json:"consumed"`
	Deliveries    int `json:"deliveries"`
	Acked         int `json:"acked"`
	// Lost is how many records answered 202 were never delivered;
	// LostIDs the first few of them.
	Lost            int      `json:"lost"`
	LostIDs         []string `json:"lost_ids,omitempty"`
	Phantoms        int      `json:"phantoms"`
	OffsetConflicts int      `json:"offset_conflicts"`
	BeyondWatermark int      `json:"beyond_watermark"`
	// Unreadable counts deliveries whose body carried no id.
	Unreadable       int `json:"unreadable"`
	Duplicates       int `json:"duplicates"`
	DuplicateRecords int `json:"duplicate_records"`
	// DuplicatesByFault counts each duplicate delivery against the kind of
	// the last fault fired before it ("none" before the first).
	DuplicatesByFault map[string]int `json:"duplicates_by_fault"`
	Examples          []string       `json:"examples,omitempty"`

	// What the workers met on the way.
	ProduceRetries int64    `json:"produce_retries"`
	ProduceGaveUp  int64    `json:"produce_gave_up"`
	ProduceRefused int64    `json:"produce_refused"`
	ConsumeErrors  int64    `json:"consume_errors"`
	AckRetries     int64    `json:"ack_retries"`
	AckGone        int64    `json:"ack_gone"`
	AckGaveUp      int64    `json:"ack_gave_up"`
	AckRefused     int64    `json:"ack_refused"`
	Errors         []string `json:"errors,omitempty"`

	// Drained says every record answered 202 was delivered before -drain
	// passed; DrainTook is how long that took after the producers stopped.
	Drained   bool          `json:"drained"`
	DrainTook time.Duration `json:"drain_ns"`
	// Failure is what stopped the run early, if anything did.
	Failure string `json:"failure,omitempty"`
}

// maxLostIDs bounds the ids of lost records a summary lists.
const maxLostIDs = 20

// newSummary judges a run: the history's report, the workers' counts and
// each duplicate against the fault it followed.
func newSummary(cfg config, schedule []Fault, thrown []ran, w *workers) *summary {
	rep := w.hist.Check()
	s := &summary{Seed: cfg.seed, Replay: replay(cfg), Kinds: cfg.kinds, Schedule: schedule, Ran: thrown,
		Produced: rep.Produced, MaybeProduced: rep.MaybeProduced, Consumed: rep.Consumed, Deliveries: rep.Deliveries,
		Acked: rep.Acked, Lost: len(rep.Lost), LostIDs: rep.Lost[:min(len(rep.Lost), maxLostIDs)],
		Phantoms: rep.UnknownConsumed, OffsetConflicts: rep.OffsetConflicts, BeyondWatermark: rep.BeyondWatermark,
		Unreadable: int(w.unreadable.Load()), Duplicates: rep.Duplicates, DuplicateRecords: rep.DuplicateRecords,
		DuplicatesByFault: attribute(w.duplicateTimes(), thrown), Examples: rep.Examples,
		ProduceRetries: w.produceRetries.Load(), ProduceGaveUp: w.produceGaveUp.Load(), ProduceRefused: w.produceRefused.Load(),
		ConsumeErrors: w.consumeErrors.Load(), AckRetries: w.ackRetries.Load(), AckGone: w.ackGone.Load(),
		AckGaveUp: w.ackGaveUp.Load(), AckRefused: w.ackRefused.Load(), Errors: w.refusals()}
	return s
}

// attribute counts each duplicate (its time since the start) against the
// kind of the last fault fired at or before it, beforeFaults when none was.
// thrown is in the order fired.
func attribute(dups []time.Duration, thrown []ran) map[string]int {
	out := map[string]int{}
	for _, at := range dups {
		i := sort.Search(len(thrown), func(i int) bool { return thrown[i].Fired > at })
		if i == 0 {
			out[beforeFaults]++
			continue
		}
		out[string(thrown[i-1].Kind)]++
	}
	return out
}

// replay is the command line that throws cfg's schedule again.
func replay(cfg config) string {
	ks := kindStrings(cfg.kinds)
	gap := cfg.gapMin.String()
	if cfg.gapMax != cfg.gapMin {
		gap += "-" + cfg.gapMax.String()
	}
	nats := ""
	if cfg.nats != 1 {
		nats = fmt.Sprintf(" -nats %d", cfg.nats)
	}
	if cfg.netns {
		nats += " -netns"
	}
	if cfg.loopDisks {
		nats += " -loop-disks"
	}
	if cfg.overlap {
		nats += " -overlap"
	}
	faults := "-faults " + strings.Join(ks, ",")
	if cfg.upgradeFrom != "" {
		faults = "-upgrade-from " + cfg.upgradeFrom
	}
	return fmt.Sprintf("go run ./bench/chaos -seed %d -duration %v -nodes %d%s %s -gap %s -dead-timeout %v -heartbeat %v",
		cfg.seed, cfg.duration, cfg.nodes, nats, faults, gap, cfg.deadTimeout, cfg.heartbeat)
}

// OK reports whether the broker kept its promises and the run finished:
// nothing lost, no phantom, no reused offset, nothing past a high
// watermark, every body readable, every node back.
func (s *summary) OK() bool {
	return s.Lost == 0 && s.Phantoms == 0 && s.OffsetConflicts == 0 && s.BeyondWatermark == 0 &&
		s.Unreadable == 0 && s.Failure == ""
}

func (s *summary) verdict() string {
	switch {
	case s.Lost > 0:
		return fmt.Sprintf("LOST: %d records answered 202 were never delivered", s.Lost)
	case !s.OK():
		return "FAILED"
	}
	return "OK"
}

func (s *summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d\nreplay: %s\n", s.Seed, s.Replay)
	fmt.Fprintf(&b, "schedule as run (%d of %d faults thrown; times from the start):\n  %s\n", len(s.Ran), len(s.Schedule), ranHeader)
	for _, r := range s.Ran {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	for _, f := range s.Schedule[len(s.Ran):] {
		fmt.Fprintf(&b, "  %s  (not thrown)\n", f)
	}
	fmt.Fprintf(&b, "records: produced %d (202), %d more maybe (errored, never 202); consumed %d distinct in %d deliveries, acked %d\n",
		s.Produced, s.MaybeProduced, s.Consumed, s.Deliveries, s.Acked)
	fmt.Fprintf(&b, "lost %d, phantoms %d, offset conflicts %d, past high watermark %d, unreadable %d\n",
		s.Lost, s.Phantoms, s.OffsetConflicts, s.BeyondWatermark, s.Unreadable)
	fmt.Fprintf(&b, "duplicate deliveries %d (%d records stored twice), by the fault before them:", s.Duplicates, s.DuplicateRecords)
	fmt.Fprintf(&b, " %s %d", beforeFaults, s.DuplicatesByFault[beforeFaults])
	for _, k := range s.Kinds {
		fmt.Fprintf(&b, " %s %d", k, s.DuplicatesByFault[string(k)])
	}
	drain := "every record answered 202 delivered " + seconds(s.DrainTook) + " after the producers stopped"
	if !s.Drained {
		drain = "the drain ran out with records answered 202 not delivered"
	}
	fmt.Fprintf(&b, "\nclients: produce retries %d, gave up %d, refused %d; consume errors %d; ack retries %d, 410 %d, gave up %d, refused %d; %s\n",
		s.ProduceRetries, s.ProduceGaveUp, s.ProduceRefused, s.ConsumeErrors, s.AckRetries, s.AckGone, s.AckGaveUp, s.AckRefused, drain)
	for _, e := range s.Errors {
		fmt.Fprintf(&b, "  error: %s\n", e)
	}
	for _, e := range s.Examples {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	if len(s.LostIDs) > 0 {
		fmt.Fprintf(&b, "  lost ids (first %d): %s\n", len(s.LostIDs), strings.Join(s.LostIDs, " "))
	}
	if s.Failure != "" {
		fmt.Fprintf(&b, "run stopped early: %s\n", s.Failure)
	}
	v := s.verdict()
	if s.Lost > 0 {
		v = "!!! " + v + " !!!"
	}
	fmt.Fprintf(&b, "verdict: %s (seed %d)\n", v, s.Seed)
	return b.String()
}

func kindNames() []string { return kindStrings(kinds) }

func (s *summary) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*summary
		Verdict string `json:"verdict"`
		OK      bool   `json:"ok"`
	}{s, s.verdict(), s.OK()})
}
