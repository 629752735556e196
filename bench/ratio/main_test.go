package main

import (
	"strings"
	"testing"
)

// canned is real go test output, trimmed, with the kinds of lines the tool
// must skip, a GOMAXPROCS suffix, a -count repeat, a three-member group,
// a group without a baseline and a benchmark with no sub-benchmarks.
const canned = `goos: linux
goarch: amd64
pkg: github.com/naradmq/narad/storage
cpu: AMD EPYC 7B13
BenchmarkAppend/batch=1/narad-2         	     200	   2500000 ns/op	   0.43 MB/s	  400.0 records/s
BenchmarkAppend/batch=1/raw-2           	     200	   2000000 ns/op	   0.53 MB/s	  500.0 records/s
BenchmarkAppend/batch=256/narad-2       	     200	   1000000 ns/op	 273.66 MB/s	256000 records/s
BenchmarkAppend/batch=256/raw-2         	     200	    800000 ns/op	 342.08 MB/s	320000 records/s
BenchmarkAppend/batch=256/narad-2       	     200	   1200000 ns/op	 228.05 MB/s	213333 records/s
BenchmarkInstallSmall/1000/serial-2     	       3	 400000000 ns/op	      2500 installs/s
BenchmarkInstallSmall/1000/batch-2      	       3	  20000000 ns/op	     50000 installs/s
BenchmarkInstallSmall/1000/raw-2        	       3	 200000000 ns/op	      5000 fsyncs/s
BenchmarkRecoverActiveSegment/64MiB-2   	      10	  50000000 ns/op	1342.18 MB/s
BenchmarkRead-2                         	     100	    600000 ns/op	1747.63 MB/s
--- BENCH: BenchmarkSomething
    bench_test.go:1: a log line
PASS
ok  	github.com/naradmq/narad/storage	42.000s
`

func TestRatios(t *testing.T) {
	var out strings.Builder
	if err := run(strings.NewReader(canned), &out, "raw", "mean"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	t.Log("\n" + got)
	for _, want := range []string{
		"narad/raw = 0.80",  // batch=1: 2.0 ms / 2.5 ms
		"narad/raw = 0.73",  // batch=256: 0.8 ms / mean(1.0, 1.2) ms
		"serial/raw = 0.50", // 200 ms / 400 ms
		"batch/raw = 10.00", // 200 ms / 20 ms
		"mean of 2 runs",
		"(no raw baseline)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 9 {
		t.Fatalf("got %d result lines, want 9 (one per distinct benchmark)", len(lines))
	}
	for _, l := range lines {
		if strings.Contains(l, "-2 ") || strings.Contains(l, "-2\t") {
			t.Errorf("GOMAXPROCS suffix left in %q", l)
		}
	}
	for i, prefix := range []string{
		"BenchmarkAppend/batch=1 ", "BenchmarkAppend/batch=1 ",
		"BenchmarkAppend/batch=256 ", "BenchmarkAppend/batch=256 ",
		"BenchmarkInstallSmall/1000 ", "BenchmarkInstallSmall/1000 ", "BenchmarkInstallSmall/1000 ",
		"BenchmarkRecoverActiveSegment ", "BenchmarkRead ",
	} {
		if !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("line %d is %q, want it to start with %q", i, lines[i], prefix)
		}
	}
}

func TestOtherBase(t *testing.T) {
	var out strings.Builder
	if err := run(strings.NewReader(canned), &out, "serial", "median"); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "batch/serial = 20.00") || !strings.Contains(got, "raw/serial = 2.00") {
		t.Errorf("with -base serial:\n%s", got)
	}
}

func TestNoResults(t *testing.T) {
	if err := run(strings.NewReader("PASS\nok  \tpkg\t0.1s\n"), new(strings.Builder), "raw", "median"); err == nil {
		t.Error("no error for input without benchmark results")
	}
}

func TestNoProcsSuffix(t *testing.T) {
	in := "BenchmarkX/a/narad \t 3\t 300 ns/op\nBenchmarkX/a/raw \t 3\t 150 ns/op\n"
	var out strings.Builder
	if err := run(strings.NewReader(in), &out, "raw", "median"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "narad/raw = 0.50") {
		t.Errorf("GOMAXPROCS=1 output:\n%s", out.String())
	}
}

// Three runs of one pair, one of them stalled: the median ignores the
// stall, the mean does not, the minimum takes each side's best.
func TestStat(t *testing.T) {
	in := `BenchmarkX/a/narad-2 	 3	 100 ns/op
BenchmarkX/a/raw-2 	 3	 80 ns/op
BenchmarkX/a/narad-2 	 3	 1000 ns/op
BenchmarkX/a/raw-2 	 3	 90 ns/op
BenchmarkX/a/narad-2 	 3	 110 ns/op
BenchmarkX/a/raw-2 	 3	 85 ns/op
`
	for stat, want := range map[string]string{
		"median": "narad/raw = 0.77", // 85 / 110
		"mean":   "narad/raw = 0.21", // 85 / 403.3
		"min":    "narad/raw = 0.80", // 80 / 100
	} {
		var out strings.Builder
		if err := run(strings.NewReader(in), &out, "raw", stat); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), stat+" of 3 runs") {
			t.Errorf("-stat %s:\n%s", stat, out.String())
		}
	}
	if err := run(strings.NewReader(in), new(strings.Builder), "raw", "p99"); err == nil {
		t.Error("no error for an unknown -stat")
	}
}
