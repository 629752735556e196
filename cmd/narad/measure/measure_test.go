package measure

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func msList(vs ...int) []time.Duration {
	out := make([]time.Duration, len(vs))
	for i, v := range vs {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

// Nearest rank on known inputs: 1..100 ms gives p50 = 50 ms, p95 = 95 ms,
// p99 = 99 ms; a small sample's high percentiles are its max, never a
// value that was not measured.
func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tt := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", msList(7), 50, 7 * time.Millisecond},
		{"one value p99", msList(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", msList(hundred...), 50, 50 * time.Millisecond},
		{"p95 of 1..100", msList(hundred...), 95, 95 * time.Millisecond},
		{"p99 of 1..100", msList(hundred...), 99, 99 * time.Millisecond},
		{"p100 of 1..100", msList(hundred...), 100, 100 * time.Millisecond},
		{"p50 of four", msList(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p95 of four is the max", msList(1, 2, 3, 4), 95, 4 * time.Millisecond},
		{"p99 of four is the max", msList(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{"tiny p is the min", msList(1, 2, 3, 4), 0.1, 1 * time.Millisecond},
		{"p95 of 1..20", msList(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 95, 19 * time.Millisecond},
	} {
		if got := Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}

// Summarize merges the workers' samples before ranking them: the figures
// are those of all samples together, not an average of the workers'.
func TestSummarizeMergesWorkers(t *testing.T) {
	got := Summarize([][]time.Duration{msList(3, 1), nil, msList(2, 4)})
	want := Latencies{Count: 4, P50Ms: 2, P95Ms: 4, P99Ms: 4, MaxMs: 4}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	hundred := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- { // unsorted on purpose
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	got = Summarize([][]time.Duration{hundred[:30], hundred[30:]})
	want = Latencies{Count: 100, P50Ms: 50, P95Ms: 95, P99Ms: 99, MaxMs: 100}
	if got != want {
		t.Errorf("1..100 over two workers: got %+v, want %+v", got, want)
	}
	if got := Summarize(nil); got != (Latencies{}) {
		t.Errorf("got %+v for no samples, want zeros", got)
	}
}

func TestRatesAndSpans(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want float64
	}{
		{"1000 in 2s", Rate(1000, 2*time.Second), 500},
		{"in 250ms", Rate(10, 250*time.Millisecond), 40},
		{"no time", Rate(10, 0), 0},
		{"negative time", Rate(10, -time.Second), 0},
		{"MiB/s", MiBPerSecond(3<<20, 2*time.Second), 1.5},
		{"span", Span(1_000, 3_000).Seconds(), 2e-6},
		{"span without a start", Span(0, 3_000).Seconds(), 0},
		{"span out of order", Span(3_000, 1_000).Seconds(), 0},
	} {
		if math.Abs(tt.got-tt.want) > 1e-12 {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if got := FmtMs(1.234567); got != "1.23ms" {
		t.Errorf("FmtMs(1.234567): got %q, want 1.23ms", got)
	}
}

func TestRaiseTo(t *testing.T) {
	var v atomic.Int64
	RaiseTo(&v, 5)
	RaiseTo(&v, 3)
	if got := v.Load(); got != 5 {
		t.Errorf("got %d, want 5", got)
	}
}

// At 4 records a second the schedule is 0, 250, 500, 750 ms, 1 s...; at 3
// a second record 4 is due at exactly 1 s (the fraction is kept, not
// rounded per record). No rate is no schedule.
func TestPacerSchedule(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	p := NewPacer(4, start)
	for n, want := range map[int64]time.Duration{1: 0, 2: 250 * time.Millisecond, 4: 750 * time.Millisecond, 5: time.Second, 401: 100 * time.Second} {
		if got := p.Due(n).Sub(start); got != want {
			t.Errorf("rate 4: record %d due at +%s, want +%s", n, got, want)
		}
	}
	if got := NewPacer(3, start).Due(4).Sub(start); got != time.Second {
		t.Errorf("rate 3: record 4 due at +%s, want +1s", got)
	}
	if got := p.Behind(2, start.Add(time.Second)); got != 750*time.Millisecond {
		t.Errorf("record 2 sent at +1s: behind %s, want 750ms", got)
	}
	if got := p.Behind(5, start); got != 0 {
		t.Errorf("record 5 sent early: behind %s, want 0", got)
	}
	if NewPacer(0, start) != nil {
		t.Errorf("rate 0: got a pacer, want none (as fast as possible)")
	}
	var none *Pacer
	if err := none.Wait(t.Context(), 1_000_000); err != nil || !none.Due(9).IsZero() {
		t.Errorf("no pacer: Wait %v, Due %v; want no wait", err, none.Due(9))
	}
}

func TestBodyCarriesIDAndSendTime(t *testing.T) {
	pad := Pad(1024)
	b := MakeBody("r1-p0-0000001", 1700000000123456789, 1024, pad)
	if len(b) != 1024 {
		t.Errorf("got %d bytes, want 1024", len(b))
	}
	if !json.Valid(b) {
		t.Fatalf("got invalid JSON %s", b)
	}
	id, ts, ok := ParseBody(b)
	if !ok || id != "r1-p0-0000001" || ts != 1700000000123456789 {
		t.Errorf("got %q %d %v, want r1-p0-0000001 1700000000123456789 true", id, ts, ok)
	}
	exact := BodyOverhead(len("r1-7"))
	if got := len(MakeBody("r1-7", 1700000000123456789, exact, pad)); got != exact {
		t.Errorf("at the overhead: got %d bytes, want %d", got, exact)
	}
	if small := MakeBody("r1-7", 1700000000123456789, 1, pad); !json.Valid(small) || len(small) != exact {
		t.Errorf("below the overhead: got %d bytes %s, want the smallest valid body (%d)", len(small), small, exact)
	}
	if _, _, ok := ParseBody([]byte("hello")); ok {
		t.Errorf("ParseBody(hello): got ok, want not one of ours")
	}
}

// On a terminal every Draw redraws the line in place and Final ends it;
// elsewhere a plain line at most every plainEvery, and Final always.
func TestProgressLines(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	var tty, plain bytes.Buffer
	pt, pp := NewProgress(&tty, true, 2*time.Second), NewProgress(&plain, false, 2*time.Second)
	for i, line := range []string{"a long first line", "short", "third"} {
		now := at.Add(time.Duration(i) * time.Second)
		pt.Draw(now, line)
		pp.Draw(now, line)
	}
	pt.Final("done")
	pp.Final("done")
	if want := "\ra long first line\rshort            \rthird            \rdone             \n"; tty.String() != want {
		t.Errorf("tty: got %q, want %q", tty.String(), want)
	}
	if want := "a long first line\nthird\ndone\n"; plain.String() != want {
		t.Errorf("plain: got %q, want %q", plain.String(), want)
	}
	if strings.Contains(plain.String(), "\r") {
		t.Errorf("plain: got a carriage return in %q", plain.String())
	}
}
