package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// phaseTimes is, per move phase, how many moves left it and the seconds
// they spent in it, summed over the nodes read: where a moved partition's
// time goes (narad_move_phase_seconds, and the freeze as a whole from
// narad_move_freeze_seconds).
type phaseTimes map[string]phaseTime

// phaseTime is one phase's histogram summed over nodes: moves, seconds, and
// the cumulative count at each bucket's upper bound (le).
type phaseTime struct {
	count int64
	sum   float64
	le    map[float64]float64
}

// quantile estimates the q'th quantile (0 < q <= 1) of phase's times from
// its buckets, interpolating linearly inside the bucket it falls in, as
// Prometheus's histogram_quantile does; ok is false without samples.
func (t phaseTimes) quantile(phase string, q float64) (float64, bool) {
	e := t[phase]
	if e.count == 0 || len(e.le) == 0 {
		return 0, false
	}
	bounds := make([]float64, 0, len(e.le))
	for b := range e.le {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	rank := q * float64(e.count)
	lo, below := 0.0, 0.0
	for _, b := range bounds {
		c := e.le[b]
		if c >= rank {
			if math.IsInf(b, 1) {
				return lo, true
			}
			if c == below {
				return b, true
			}
			return lo + (b-lo)*(rank-below)/(c-below), true
		}
		lo, below = b, c
	}
	return lo, true
}

// readPhases adds the phase histograms of the node at base to t.
func readPhases(ctx context.Context, base string, t phaseTimes) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return err
	}
	authorize(req)
	resp, err := apiClient.Do(req)
	if err != nil {
		return fmt.Errorf("get /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get /metrics: %d", resp.StatusCode)
	}
	return parsePhases(io.LimitReader(resp.Body, 64<<20), t)
}

// parsePhases reads the _sum and _count lines of the phase and freeze
// histograms from a /metrics text.
func parsePhases(r io.Reader, t phaseTimes) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var phase, rest string
		switch {
		case strings.HasPrefix(line, "narad_move_phase_seconds_"):
			i := strings.Index(line, `phase="`)
			if i < 0 {
				continue
			}
			phase = line[i+len(`phase="`):]
			phase = phase[:strings.IndexByte(phase, '"')]
			rest = line[len("narad_move_phase_seconds_"):]
		case strings.HasPrefix(line, "narad_move_freeze_seconds_"):
			phase, rest = "frozen (prepare to flip)", line[len("narad_move_freeze_seconds_"):]
		default:
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return fmt.Errorf("metrics line %q: %w", line, err)
		}
		e := t[phase]
		switch {
		case strings.HasPrefix(rest, "sum"):
			e.sum += v
		case strings.HasPrefix(rest, "count"):
			e.count += int64(v)
		case strings.HasPrefix(rest, "bucket"):
			i := strings.Index(line, `le="`)
			if i < 0 {
				continue
			}
			le := line[i+len(`le="`):]
			b, err := strconv.ParseFloat(le[:strings.IndexByte(le, '"')], 64)
			if err != nil {
				return fmt.Errorf("metrics line %q: %w", line, err)
			}
			if e.le == nil {
				e.le = map[float64]float64{}
			}
			e.le[b] += v
		default:
			continue
		}
		t[phase] = e
	}
	return sc.Err()
}

// String lists each phase a move left at least once: moves, mean, and the
// p50 and p99 from its buckets, since a tail, not a mean, is what a frozen
// window's goal is read from.
func (t phaseTimes) String() string {
	var names []string
	for n, e := range t {
		if e.count > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		e := t[n]
		p50, _ := t.quantile(n, 0.5)
		p99, _ := t.quantile(n, 0.99)
		fmt.Fprintf(&b, "  %-26s %6d moves, mean %7.1f ms, p50 %7.1f, p99 %7.1f\n", n, e.count, 1000*e.sum/float64(e.count), 1000*p50, 1000*p99)
	}
	return b.String()
}
