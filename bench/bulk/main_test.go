package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/bench/proc"
	"github.com/naradmq/narad/messages"
)

func TestQuickScalesDownUnlessAFlagSaysOtherwise(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-topics", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.topics != 5 {
		t.Errorf("topics: got %d, want 5 (the flag beats -quick)", c.topics)
	}
	if c.perTopic != 100 || c.joinPerTopic != 60 || c.joinTopics != 1 {
		t.Errorf("quick layout: got %d per topic, %d join topics of %d, want 100, 1 of 60", c.perTopic, c.joinTopics, c.joinPerTopic)
	}
	if c.passTimeout != 20*time.Second {
		t.Errorf("quick pass timeout: got %v, want 20s", c.passTimeout)
	}
	if !slices.Equal(c.variants, []bool{true, false}) {
		t.Errorf("variants: got %v, want [true false] (on, then off)", c.variants)
	}
}

func TestFlagsOutOfRangeAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-partitions-per-topic", "109"},
		{"-partitions-per-topic", "2"},
		{"-records-per-partition", "0"},
		{"-pass-timeout", "0s"},
		{"-variants", "on,maybe"},
		{"-join-record-bytes", strconv.Itoa(1 << 20)},
		{"-profile-for", "1500ms"},
		{"-profile-for", "0s"},
	} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, errConfig) {
			t.Errorf("%v: got %v, want errConfig", args, err)
		}
	}
}

func TestWithinBalanceIsOnePercentAndAtLeastOne(t *testing.T) {
	for _, c := range []struct {
		owned, share int
		want         bool
	}{
		{10000, 10000, true}, {9900, 10000, true}, {9899, 10000, false}, {10100, 10000, true}, {10101, 10000, false},
		{14, 15, true}, {16, 15, true}, {13, 15, false}, {0, 15, false},
	} {
		if got := withinBalance(c.owned, c.share); got != c.want {
			t.Errorf("withinBalance(%d, %d): got %v, want %v", c.owned, c.share, got, c.want)
		}
	}
}

func TestTableAlignsEveryColumn(t *testing.T) {
	got := formatTable([][]string{{"figure", "with"}, {"stop", "0.04 s"}, {"restart of n3", "±1%"}})
	want := "figure        | with\n" +
		"------------- | ------\n" +
		"stop          | 0.04 s\n" +
		"restart of n3 | ±1%\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestAFigureNotMeasuredSaysSo(t *testing.T) {
	r := &runner{figures: map[bool]map[string]string{true: {"stop.exit": "2.50 s"}}}
	rows := r.rows()
	i := slices.IndexFunc(rows, func(r []string) bool { return strings.HasPrefix(r[0], "graceful stop") })
	if i < 0 {
		t.Fatal("no graceful stop row")
	}
	if rows[i][1] != "2.50 s" || rows[i][2] != "not run" {
		t.Errorf("graceful stop: got %q, %q, want 2.50 s, not run", rows[i][1], rows[i][2])
	}
	if got := waitCell(waitResult{moved: 2, total: 3, err: proc.ErrTimeout}, 20*time.Second); got != "timeout after 20.0 s (2 of 3 moved)" {
		t.Errorf("a wait past its bound: got %q", got)
	}
}

func TestTheOffVariantTurnsTheHandOffOffAndTheOnVariantLeavesTheDefault(t *testing.T) {
	t.Setenv(handoffEnv, "7s")
	on := (&cluster{handoff: true}).nodeEnv()
	off := (&cluster{handoff: false}).nodeEnv()
	if slices.ContainsFunc(on, func(kv string) bool { return strings.HasPrefix(kv, handoffEnv+"=") }) {
		t.Errorf("on: got %s in the environment, want it unset", handoffEnv)
	}
	n := 0
	for _, kv := range off {
		if strings.HasPrefix(kv, handoffEnv+"=") {
			n++
			if kv != handoffEnv+"=0s" {
				t.Errorf("off: got %s, want %s=0s", kv, handoffEnv)
			}
		}
	}
	if n != 1 {
		t.Errorf("off: got %s %d times, want once", handoffEnv, n)
	}
	set := (&cluster{handoff: true, handoffTimeout: time.Minute}).nodeEnv()
	if got := slices.DeleteFunc(set, func(kv string) bool { return !strings.HasPrefix(kv, handoffEnv+"=") }); !slices.Equal(got, []string{handoffEnv + "=1m0s"}) {
		t.Errorf("on with -handoff-timeout 1m: got %q, want [%s=1m0s]", got, handoffEnv)
	}
}

// fakeStats answers a topic's stats like a node whose peer owning stale
// partitions is down: the topic read fails, single partitions answer except
// the dead ones.
type fakeStats struct {
	hwm  map[int]int64
	dead map[int]bool
}

func (f fakeStats) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, one := r.URL.Query()["partition"]
	if !one {
		http.Error(w, `{"error":"partition stats failed"}`, http.StatusInternalServerError)
		return
	}
	i, _ := strconv.Atoi(v[0])
	if f.dead[i] {
		http.Error(w, `{"error":"partition stats failed"}`, http.StatusInternalServerError)
		return
	}
	json.NewEncoder(w).Encode(messages.TopicDetails{PartitionStats: []messages.PartitionInfo{{Index: i, HighWatermark: f.hwm[i]}}})
}

func statsBrokers(t *testing.T, f fakeStats) *brokers {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	b, err := newBrokers([]*proc.Node{{HTTP: strings.TrimPrefix(srv.URL, "http://")}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	return b
}

func TestAWriteWaitCountsLivePartitionsOfATopicWithADeadOwner(t *testing.T) {
	l := newLayout("t", 1, 3)
	base := map[part]int64{{"t-000", 0}: 3, {"t-000", 1}: 3, {"t-000", 2}: 3}
	b := statsBrokers(t, fakeStats{hwm: map[int]int64{0: 4, 1: 4}, dead: map[int]bool{2: true}})
	got := waitHWM(context.Background(), b, l, base, 1, 2, time.Millisecond, 20*time.Millisecond, time.Now())
	if !errors.Is(got.err, proc.ErrTimeout) || got.moved != 2 || got.total != 3 {
		t.Errorf("got %d of %d moved, err %v; want 2 of 3, a timeout", got.moved, got.total, got.err)
	}
}

func TestAWriteWaitEndsWhenEveryMarkIsReached(t *testing.T) {
	l := newLayout("t", 1, 3)
	base := map[part]int64{{"t-000", 0}: 3, {"t-000", 1}: 3, {"t-000", 2}: 3}
	b := statsBrokers(t, fakeStats{hwm: map[int]int64{0: 4, 1: 5, 2: 4}})
	got := waitHWM(context.Background(), b, l, base, 1, 2, time.Millisecond, 10*time.Second, time.Now())
	if got.err != nil || got.moved != 3 {
		t.Errorf("got %d of %d moved, err %v; want 3 of 3, no error", got.moved, got.total, got.err)
	}
}

func TestAHighWatermarkBelowItsMarkDoesNotCount(t *testing.T) {
	m := newMarks(newLayout("t", 1, 3), map[part]int64{}, 2)
	m.seen("t-000", 0, 1)
	m.seen("t-000", 1, 2)
	m.seen("t-000", 1, 2)
	if n, _ := m.remaining(); n != 2 {
		t.Errorf("remaining: got %d, want 2", n)
	}
	m.failed(part{"t-000", 0})
	if got, want := m.shortOf([]string{"t-000"}), []part{{"t-000", 2}, {"t-000", 0}}; !slices.Equal(got, want) {
		t.Errorf("short: got %v, want %v (the unreadable last)", got, want)
	}
}

// fakeRecords serves one topic of three partitions: its stats and the
// replay of the records it holds, by partition and offset.
type fakeRecords map[int][]string // partition: ids by offset

func (f fakeRecords) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/topics/t-000":
		d := messages.TopicDetails{TopicInfo: messages.TopicInfo{Name: "t-000", Partitions: 3}}
		for i := range 3 {
			d.PartitionStats = append(d.PartitionStats, messages.PartitionInfo{Index: i, HighWatermark: int64(len(f[i]))})
		}
		json.NewEncoder(w).Encode(d)
	case "/v1/topics/t-000/consume":
		i, _ := strconv.Atoi(r.URL.Query().Get("partition"))
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		json.NewEncoder(w).Encode(messages.MessageInfo{Topic: "t-000", Partition: i, Offset: int64(off),
			Payload: history.MakeBody(f[i][off], 0)})
	default:
		http.NotFound(w, r)
	}
}

func TestAnAcknowledgedRecordNotReadableIsReportedByID(t *testing.T) {
	srv := httptest.NewServer(fakeRecords{0: {"a"}, 1: {"b", "rerouted"}})
	t.Cleanup(srv.Close)
	b, err := newBrokers([]*proc.Node{{HTTP: strings.TrimPrefix(srv.URL, "http://")}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	h := history.New()
	for _, id := range []string{"a", "b", "rerouted", "lost"} {
		h.Produced(id)
	}
	r := &runner{cfg: config{readConc: 2, pollInterval: time.Millisecond, settleTimeout: 20 * time.Millisecond},
		log: io.Discard, figures: map[bool]map[string]string{}}
	if err := r.checkLoss(context.Background(), true, "test", b, h, newLayout("t", 1, 3)); err != nil {
		t.Fatal(err)
	}
	if got := r.figures[true]["history"]; got != "FAILED: 1 lost" {
		t.Errorf("history figure: got %q, want FAILED: 1 lost", got)
	}
	if !slices.Contains(r.losses, "  lost lost") || slices.Contains(r.losses, "  lost rerouted") {
		t.Errorf("losses: got %q, want the id lost and only it", r.losses)
	}
}

func TestLogSummaryCountsErrorsAndWarningsByMessage(t *testing.T) {
	dir := t.TempDir()
	log := `time=t level=INFO msg="move done" node=n1
time=t level=ERROR msg="partition handed over holding records past the HWM its move flipped at; copy set aside" node=n1 hwm=4
time=t level=WARN msg=plain node=n1
time=t level=ERROR msg="partition handed over holding records past the HWM its move flipped at; copy set aside" node=n1 hwm=5
`
	if err := os.WriteFile(dir+"/n1.log", []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := logSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`     2 n1.log ERROR "partition handed over holding records past the HWM its move flipped at; copy set aside"`,
		`     1 n1.log WARN plain`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRemoveDataKeepsTheLogs(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"on-stop/n1/topics/x/0/a.seg", "on-stop/nats/node.nk", "on-stop/n1.log", "on-stop/nats.log"} {
		if err := os.MkdirAll(dir+"/"+p[:strings.LastIndex(p, "/")], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removeData(dir)
	ents, err := os.ReadDir(dir + "/on-stop")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if want := []string{"n1.log", "nats.log"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// The temp dir stays whenever it holds evidence: a failed run, or a wait
// that ran out (a figure, not a failure, but what held it is in the logs).
func TestKeepReasonKeepsTheEvidence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		failed   int
		timeouts []string
		keep     bool
		kept     bool
	}{
		{"a clean run", nil, 0, nil, false, false},
		{"-keep", nil, 0, nil, true, true},
		{"an error", errors.New("x"), 0, nil, false, true},
		{"a failed history check", nil, 1, nil, false, true},
		{"a wait that ran out", nil, 0, []string{"run 1: on-stop pass.down"}, false, true},
	} {
		why := keepReason(tc.err, tc.failed, tc.timeouts, tc.keep)
		if (why != "") != tc.kept {
			t.Errorf("%s: got kept %v (%q), want %v", tc.name, why != "", why, tc.kept)
		}
	}
	if why := keepReason(nil, 0, []string{"run 2: on-stop pass.down"}, false); !strings.Contains(why, "run 2: on-stop pass.down") {
		t.Errorf("a wait that ran out: got %q, want it named", why)
	}
}

// partialStats answers a whole topic's read with partition 1 left out (as
// the API leaves out a partition whose owner answers "not served") for its
// first missing reads, then in full.
type partialStats struct {
	reads   *atomic.Int32
	missing int32
}

func (f partialStats) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	d := messages.TopicDetails{PartitionStats: []messages.PartitionInfo{{Index: 0, HighWatermark: 3}, {Index: 1, HighWatermark: 4}, {Index: 2, HighWatermark: 5}}}
	if f.reads.Add(1) <= f.missing {
		d.PartitionStats = slices.Delete(d.PartitionStats, 1, 2)
	}
	json.NewEncoder(w).Encode(d)
}

// A topic read that leaves a partition out is read again, as the contract
// asks of clients; one that keeps leaving it out fails naming it.
func TestAStatsScanReadsAPartialTopicAgainAndNamesWhatIsMissing(t *testing.T) {
	l := newLayout("t", 1, 3)
	for _, tc := range []struct {
		missing int32
		fails   bool
	}{{2, false}, {hwmAttempts, true}} {
		srv := httptest.NewServer(partialStats{reads: new(atomic.Int32), missing: tc.missing})
		b, err := newBrokers([]*proc.Node{{HTTP: strings.TrimPrefix(srv.URL, "http://")}}, 4)
		if err != nil {
			t.Fatal(err)
		}
		got, err := hwms(context.Background(), b, l, 1)
		b.close()
		srv.Close()
		if tc.fails {
			if !errors.Is(err, errPartialStats) || !strings.Contains(err.Error(), "missing [1]") {
				t.Errorf("partition 1 left out of every read: got %v, want a partial-stats error naming [1]", err)
			}
			continue
		}
		if err != nil || len(got) != 3 || got[part{"t-000", 1}] != 4 {
			t.Errorf("partition 1 left out of %d reads: got %v, %v; want all 3 HWMs", tc.missing, got, err)
		}
	}
}
