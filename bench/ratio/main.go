// Command ratio reads Go benchmark output on stdin and prints, for each
// group of benchmarks whose names differ only in their last element, every
// member's ns/op and its throughput as a ratio of the baseline member's:
//
//	go test ./storage -run '^$' -bench . -benchtime 3x | go run ./bench/ratio
//
// prints lines such as
//
//	BenchmarkAppend/batch=256  narad  1234567 ns/op  narad/raw = 0.93
//
// The ratio is base ns/op over member ns/op, so above 1 is faster than the
// baseline. Absolute times vary from machine to machine and run to run; a
// ratio against a baseline measured in the same run is what the project
// holds its benchmarks to. A benchmark that appears more than once (-count,
// or several runs concatenated) is summarised by its median ns/op by
// default: on a shared machine noise only ever slows a run down, and a
// single stalled run should not move the ratio (-stat mean|median|min).
//
// Everything is in main.go; start with run: parse groups the result lines
// by name, member.summarise reduces each member's runs to one ns/op, and
// run prints each member against its group's baseline.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	base := flag.String("base", "raw", "name of the baseline member of each group")
	stat := flag.String("stat", "median", "how repeated results are summarised: mean, median or min")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *base, *stat); err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
}

// resultLine matches "BenchmarkName[-procs] <iterations> <value> ns/op ...".
var resultLine = regexp.MustCompile(`^(Benchmark\S+)\s+\d+\s+([0-9.eE+-]+) ns/op`)

// procsSuffix is the -N that go test appends when GOMAXPROCS > 1.
var procsSuffix = regexp.MustCompile(`-\d+$`)

type member struct {
	name string
	ns   []float64 // one per run, in input order
	sum  float64   // the summary the ratio uses, set by summarise
}

func (m *member) summarise(stat string) error {
	sorted := slices.Sorted(slices.Values(m.ns))
	switch stat {
	case "mean":
		var t float64
		for _, v := range sorted {
			t += v
		}
		m.sum = t / float64(len(sorted))
	case "median":
		mid := len(sorted) / 2
		m.sum = sorted[mid]
		if len(sorted)%2 == 0 {
			m.sum = (sorted[mid-1] + sorted[mid]) / 2
		}
	case "min":
		m.sum = sorted[0]
	default:
		return fmt.Errorf("unknown -stat %q (want mean, median or min)", stat)
	}
	return nil
}

type group struct {
	name    string
	members []*member
}

func (g *group) member(name string) *member {
	for _, m := range g.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// parse collects results in the order they first appear, so the output
// follows the benchmark run.
func parse(r io.Reader) ([]*group, error) {
	var groups []*group
	byName := map[string]*group{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := resultLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ns, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", sc.Text(), err)
		}
		name := procsSuffix.ReplaceAllString(m[1], "")
		groupName, memberName := name, ""
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			groupName, memberName = name[:i], name[i+1:]
		}
		g := byName[groupName]
		if g == nil {
			g = &group{name: groupName}
			byName[groupName] = g
			groups = append(groups, g)
		}
		mem := g.member(memberName)
		if mem == nil {
			mem = &member{name: memberName}
			g.members = append(g.members, mem)
		}
		mem.ns = append(mem.ns, ns)
	}
	return groups, sc.Err()
}

func run(r io.Reader, w io.Writer, base, stat string) error {
	groups, err := parse(r)
	if err != nil {
		return err
	}
	if len(groups) == 0 {
		return fmt.Errorf("no benchmark results on input")
	}
	for _, g := range groups {
		for _, m := range g.members {
			if err := m.summarise(stat); err != nil {
				return err
			}
		}
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 8, 2, ' ', 0)
	for _, g := range groups {
		b := g.member(base)
		for _, m := range g.members {
			var ratio string
			switch {
			case m == b:
				ratio = "(baseline)"
			case b == nil || m.sum == 0:
				ratio = "(no " + base + " baseline)"
			default:
				ratio = fmt.Sprintf("%s/%s = %.2f", m.name, base, b.sum/m.sum)
			}
			runs := ""
			if n := len(m.ns); n > 1 {
				runs = fmt.Sprintf("%s of %d runs", stat, n)
			}
			fmt.Fprintf(tw, "%s\t%s\t%14.0f ns/op\t%s\t%s\n", g.name, m.name, m.sum, ratio, runs)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// tabwriter pads every cell but the last, which leaves trailing blanks
	// on the lines whose last cell is empty.
	for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	return nil
}
