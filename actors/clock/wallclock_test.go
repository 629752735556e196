package clock

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// wallClockCalls are the calls that read or wait on the machine's clock
// directly, past the injected one.
var wallClockCalls = regexp.MustCompile(`\btime\.(Now|Since|Until|After|AfterFunc|NewTimer|NewTicker|Tick)\(`)

// wallClockLeft is every production file of the node that still reads the
// wall clock directly, with how many calls it makes: issue 47 moves them
// onto the injected Clock. The list only shrinks. A new call anywhere else
// fails TestNoNewWallClockReadsOutsideTheClock, and so does a file that
// makes fewer calls than listed, so that the number is lowered with the
// change that removed them. Record and segment times that clients compare
// with their own, and the cluster's cadences (heartbeats, liveness, the
// runner's tick), are among them by design today (actors/clock.go says
// why); the worker's time must stay monotonic and unstepped (rule P2).
var wallClockLeft = map[string]int{
	"actors/admin.go":                  1,
	"actors/api/batch.go":              1,
	"actors/api/data.go":               1,
	"actors/children.go":               1,
	"actors/consume.go":                3,
	"actors/controller/actor.go":       4,
	"actors/controller_route.go":       3,
	"actors/diskfull.go":               1,
	"actors/dispatch/actor.go":         1,
	"actors/fanout/actor.go":           5,
	"actors/handoff.go":                7,
	"actors/hints/notify.go":           3,
	"actors/mailboxes.go":              1,
	"actors/mover/batch.go":            1,
	"actors/mover/flipbatch.go":        1,
	"actors/node.go":                   8,
	"actors/partition/actor.go":        7,
	"actors/partition/freeze.go":       1,
	"actors/partition/supervisor.go":   1,
	"actors/peerstart.go":              1,
	"actors/produce.go":                2,
	"actors/quarantine.go":             1,
	"actors/route/commitgroup.go":      2,
	"actors/route/router.go":           2,
	"actors/supervision.go":            1,
	"actors/sweeper/asks.go":           1,
	"actors/sweeper/pass.go":           1,
	"actors/sweeper/sides.go":          1,
	"actors/sweeper/start.go":          1,
	"actors/topics.go":                 1,
	"actors/users.go":                  5,
	"cluster/membership/membership.go": 1,
	"cluster/metastore/raftmembers.go": 1,
	"cluster/metastore/store.go":       3,
	"cluster/metastore/watch.go":       1,
	"cluster/transport/metrics.go":     1,
	"cluster/transport/transport.go":   8,
	"storage/lane.go":                  3,
	"storage/wal.go":                   1,
}

// The node's production code reads the wall clock only where it did when
// the list was made, and no more often: every new timer goes through the
// injected Clock.
func TestNoNewWallClockReadsOutsideTheClock(t *testing.T) {
	root := filepath.Join("..", "..")
	got := map[string]int{}
	for _, top := range []string{"actors", "cluster", "storage", "messages"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				switch rel {
				case "actors/clock", "cluster/testnet", "cluster/transport/testpki", "cluster/metastore/metastoretest":
					return filepath.SkipDir // the clock itself, and code for tests only
				}
				if n := d.Name(); strings.HasPrefix(n, ".") || n == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if n := len(wallClockCalls.FindAll(src, -1)); n > 0 {
				got[rel] = n
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range wallClockDrift(got, wallClockLeft) {
		t.Error(b)
	}
}

// wallClockDrift says how the calls found differ from the list.
func wallClockDrift(got, listed map[string]int) []string {
	var bad []string
	for f, n := range got {
		switch want, ok := listed[f]; {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s reads the wall clock %d times: take the node's Clock (actors/clock)", f, n))
		case n > want:
			bad = append(bad, fmt.Sprintf("%s reads the wall clock %d times, %d listed: a new read takes the node's Clock", f, n, want))
		case n < want:
			bad = append(bad, fmt.Sprintf("%s reads the wall clock %d times, %d listed: lower its number in wallClockLeft", f, n, want))
		}
	}
	for f, want := range listed {
		if _, ok := got[f]; !ok {
			bad = append(bad, fmt.Sprintf("%s no longer reads the wall clock (%d listed): take it off wallClockLeft", f, want))
		}
	}
	sort.Strings(bad)
	return bad
}

// The check fails on each kind of drift.
func TestWallClockDriftFindsEachKind(t *testing.T) {
	listed := map[string]int{"a.go": 2}
	for _, tc := range []struct {
		got  map[string]int
		want string
	}{
		{map[string]int{"a.go": 2}, ""},
		{map[string]int{"a.go": 2, "b.go": 1}, "b.go reads the wall clock 1 times: take"},
		{map[string]int{"a.go": 3}, "3 times, 2 listed: a new read"},
		{map[string]int{"a.go": 1}, "lower its number"},
		{map[string]int{}, "take it off"},
	} {
		bad := wallClockDrift(tc.got, listed)
		switch {
		case tc.want == "" && len(bad) > 0:
			t.Errorf("%v: got %q, want nothing", tc.got, bad)
		case tc.want != "" && (len(bad) != 1 || !strings.Contains(bad[0], tc.want)):
			t.Errorf("%v: got %q, want one line with %q", tc.got, bad, tc.want)
		}
	}
}
