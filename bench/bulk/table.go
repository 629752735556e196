package main

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// row is one line of the table: a figure with the seed's value and the goal.
type row struct {
	figure, key, seed, goal string
}

// figureRows are the table's lines, in the order the issue lists them; the
// seed's values are seed 003's, "before" the issue's own measurements of
// the code it started from, at 30,000 partitions.
var figureRows = []row{
	{"create the partitions", "create", "-", "(before: 32.6 s for 30,000)"},
	{"fill: records in every partition (from the first create)", "fill", "-", "-"},
	{"write pass, every node up (until every HWM moved)", "pass.up", "-", "(before: 12.8 s)"},
	{"  same pass, until every 202", "pass.up.acked", "-", "(before: 7.1 s)"},
	{"graceful stop of n3 (SIGTERM to exit)", "stop.exit", "6.0 s", "<= 3 s"},
	{"  partitions handed off by n3", "stop.handed", "all", "all"},
	{"  moves a second from n3 (handed off / SIGTERM to exit)", "stop.rate", "-", ">= 3,400"},
	{"  frozen window per partition, p50 / p99 (narad_move_freeze_seconds)", "stop.frozen", "-", "p99 <= 40 ms"},
	{"  CPU during the stop (user + system; per partition handed off)", "stop.cpu", "-", "-"},
	{"  read and write system calls of n1+n2 during the stop", "stop.syscalls", "-", "-"},
	{"write pass after the stop (until every HWM moved)", "pass.down", "3.4 s (20.9 s without)", "<= 1.2 x the pass with every node up"},
	{"  after the stop / with every node up", "pass.ratio", "-", "<= 1.2"},
	{"  same pass, until every 202", "pass.down.acked", "-", "-"},
	{"restart of n3: exec to /readyz 200 (with the hand-off it starts owning none)", "restart.ready", "-", "(before: 3.4 s at 10,000)"},
	{"restart of n3: exec to owning its share (±1%)", "restart.share", "20 s", "<= 10 s"},
	{"  frozen window of the return, p50 / p99 (n3's)", "restart.frozen", "-", "p99 <= 40 ms"},
	{"peak RSS n1 (VmHWM)", "rss.n1", "-", "(before: ~190 MB)"},
	{"peak RSS n2 (VmHWM)", "rss.n2", "-", "(before: ~190 MB)"},
	{"peak RSS n3 (VmHWM, both runs)", "rss.n3", "-", "(before: ~190 MB)"},
	{"1 MB partitions onto a joining n4 (exec to balanced, no move)", "join.rebalance", "public Narad: 188 s", "<= 6 s"},
	{"decommission of n4 (until it left the members)", "join.decommission", "public Narad: 183 s", "<= 6 s"},
	{"history: every 202 readable after the run", "history", "-", "no loss"},
}

// rows fills figureRows with the cells of both variants.
func (r *runner) rows() [][]string {
	out := [][]string{{"figure", "with hand-off", "without", "seed", "goal"}}
	for _, f := range figureRows {
		out = append(out, []string{f.figure, cell(r.figures[true], f.key), cell(r.figures[false], f.key), f.seed, f.goal})
	}
	return out
}

// cell is a variant's value of one figure, "not run" when the variant or
// the scenario did not run or stopped before it.
func cell(figures map[string]string, key string) string {
	if v, ok := figures[key]; ok {
		return v
	}
	return "not run"
}

// formatTable lays rows out in columns separated by " | ", the first row
// as the header with a rule under it.
func formatTable(rows [][]string) string {
	if len(rows) == 0 {
		return ""
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	line := func(r []string) {
		for i, c := range r {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			}
		}
		b.WriteString("\n")
	}
	line(rows[0])
	rule := make([]string, len(widths))
	for i, w := range widths {
		rule[i] = strings.Repeat("-", w)
	}
	line(rule)
	for _, r := range rows[1:] {
		line(r)
	}
	return b.String()
}

// seconds prints a duration as the table does: seconds, with two decimals
// below 10 s (a stop of a small node takes tens of milliseconds).
func seconds(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// waitCell prints how a wait for high watermarks ended.
func waitCell(w waitResult, bound time.Duration) string {
	if w.err != nil {
		return fmt.Sprintf("timeout after %s (%d of %d moved)", seconds(bound), w.moved, w.total)
	}
	return seconds(w.took)
}

// ackedCell prints when a pass had every 202, or its bound.
func ackedCell(p passResult, bound time.Duration) string {
	if p.acked < 0 {
		return "timeout after " + seconds(bound)
	}
	return seconds(p.acked)
}

// frozenCell prints the frozen window's p50 and p99 from phases.
func frozenCell(phases phaseTimes) string {
	const frozen = "frozen (prepare to flip)"
	p50, ok50 := phases.quantile(frozen, 0.5)
	p99, ok99 := phases.quantile(frozen, 0.99)
	if !ok50 || !ok99 {
		return "no moves"
	}
	return fmt.Sprintf("%.0f / %.0f ms (%d moves)", 1000*p50, 1000*p99, phases[frozen].count)
}
