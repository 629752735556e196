package membership

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// Times are offsets from t0 on a fake monotonic clock: nothing here reads
// the wall clock.
var t0 = time.Unix(1_000_000, 0)

const (
	dead  = messages.MemberDead
	alive = messages.MemberAlive
)

var testConfig = Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: 2 * time.Second}

func mem(id, status string, heartbeats uint64) messages.Member {
	return messages.Member{ID: id, ReplicaID: 1, Status: status, Role: messages.RoleVoter, Heartbeats: heartbeats}
}

func markDead(id string, heartbeats uint64, silent time.Duration) Transition {
	return Transition{ID: id, From: alive, To: dead, Heartbeats: heartbeats, Silent: silent}
}

func markAlive(id string, heartbeats uint64) Transition {
	return Transition{ID: id, From: dead, To: alive, Heartbeats: heartbeats}
}

// step is one Observe at t0+at of the members, and the transitions it must
// return.
type step struct {
	at      time.Duration
	members []messages.Member
	want    []Transition
}

// replay is a new tracker that observed steps in order; a step whose
// transitions are not the ones it names fails the test.
func replay(t testing.TB, steps []step) *Tracker {
	t.Helper()
	tr, err := NewTracker(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if got := tr.Observe(t0.Add(s.at), s.members); !reflect.DeepEqual(got, s.want) {
			t.Errorf("step %d at %s: got %+v, want %+v", i, s.at, got, s.want)
		}
	}
	return tr
}

func TestTrackerObserve(t *testing.T) {
	const d = 30 * time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "a member silent for DeadTimeout is marked dead, not a moment before",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", alive, 5)}},
				{at: d - time.Nanosecond, members: []messages.Member{mem("n1", alive, 5)}},
				{at: d, members: []messages.Member{mem("n1", alive, 5)}, want: []Transition{markDead("n1", 5, d)}},
			},
		},
		{
			name: "a heartbeating member is never marked dead",
			steps: func() []step {
				var s []step
				for i := range 100 { // 200 s, over six dead timeouts
					s = append(s, step{at: time.Duration(i) * 2 * time.Second, members: []messages.Member{mem("n1", alive, uint64(i))}})
				}
				return s
			}(),
		},
		{
			name: "a member heartbeating within DeadTimeout is never marked dead",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", alive, 0)}},
				{at: d - time.Second, members: []messages.Member{mem("n1", alive, 1)}},
				{at: 2*d - 2*time.Second, members: []messages.Member{mem("n1", alive, 2)}},
				{at: 3*d - 3*time.Second, members: []messages.Member{mem("n1", alive, 3)}},
			},
		},
		{
			name: "the timeout runs from the last counter change, not the first observation",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", alive, 0)}},
				{at: 10 * time.Second, members: []messages.Member{mem("n1", alive, 1)}},
				{at: d, members: []messages.Member{mem("n1", alive, 1)}},
				{at: d + 10*time.Second, members: []messages.Member{mem("n1", alive, 1)}, want: []Transition{markDead("n1", 1, d)}},
			},
		},
		{
			name: "a mark dead stays due until the record reads dead",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", alive, 0)}},
				{at: d, members: []messages.Member{mem("n1", alive, 0)}, want: []Transition{markDead("n1", 0, d)}},
				{at: d + time.Second, members: []messages.Member{mem("n1", alive, 0)}, want: []Transition{markDead("n1", 0, d+time.Second)}},
				{at: d + 2*time.Second, members: []messages.Member{mem("n1", dead, 0)}},
				{at: 5 * d, members: []messages.Member{mem("n1", dead, 0)}},
			},
		},
		{
			name: "a dead member whose heartbeats resume is marked alive at once",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", alive, 3)}},
				{at: d, members: []messages.Member{mem("n1", dead, 3)}},
				{at: d + time.Second, members: []messages.Member{mem("n1", dead, 4)}, want: []Transition{markAlive("n1", 4)}},
				// Applied: alive, with a fresh stamp from the resumption.
				{at: d + 2*time.Second, members: []messages.Member{mem("n1", alive, 4)}},
				{at: 2*d + time.Second - time.Nanosecond, members: []messages.Member{mem("n1", alive, 4)}},
				{at: 2*d + time.Second, members: []messages.Member{mem("n1", alive, 4)}, want: []Transition{markDead("n1", 4, d)}},
			},
		},
		{
			name: "a dead member that stays silent is left dead",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", dead, 3)}},
				{at: 10 * d, members: []messages.Member{mem("n1", dead, 3)}},
			},
		},
		{
			// rule T1: a new leader measures on its own clock. The member
			// was silent long before this tracker existed (its counter
			// never changes here); the first observation is the stamp.
			name: "a new tracker does not mark dead before DeadTimeout of its own observation",
			steps: []step{
				{at: 10 * d, members: []messages.Member{mem("n1", alive, 7)}},
				{at: 11*d - time.Nanosecond, members: []messages.Member{mem("n1", alive, 7)}},
				{at: 11 * d, members: []messages.Member{mem("n1", alive, 7)}, want: []Transition{markDead("n1", 7, d)}},
			},
		},
		{
			name: "a new tracker revives a dead member on its next heartbeat, not on the first observation",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", dead, 7)}},
				{at: time.Second, members: []messages.Member{mem("n1", dead, 8)}, want: []Transition{markAlive("n1", 8)}},
			},
		},
		{
			name: "a removed member is forgotten and stamped afresh when it comes back",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", alive, 0), mem("n2", alive, 0)}},
				{at: d / 2, members: []messages.Member{mem("n2", alive, 1)}},
				// n1 registered again: a new member to this tracker.
				{at: d, members: []messages.Member{mem("n1", alive, 0), mem("n2", alive, 2)}},
				{at: 2*d - time.Nanosecond, members: []messages.Member{mem("n1", alive, 0), mem("n2", alive, 3)}},
				{at: 2 * d, members: []messages.Member{mem("n1", alive, 0), mem("n2", alive, 4)}, want: []Transition{markDead("n1", 0, d)}},
			},
		},
		{
			name: "transitions follow the order of members, each judged alone",
			steps: []step{
				{at: 0, members: []messages.Member{mem("a", alive, 0), mem("b", dead, 0), mem("c", alive, 0), mem("d", alive, 0)}},
				{at: d, members: []messages.Member{mem("a", alive, 0), mem("b", dead, 1), mem("c", alive, 1), mem("d", alive, 0)},
					want: []Transition{markDead("a", 0, d), markAlive("b", 1), markDead("d", 0, d)}},
			},
		},
		{
			name: "a status this tracker does not know is only stamped",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", "suspect", 0)}},
				{at: 10 * d, members: []messages.Member{mem("n1", "suspect", 1)}},
				{at: 20 * d, members: []messages.Member{mem("n1", "suspect", 1)}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			replay(t, tt.steps)
		})
	}
}

func TestTrackerStampAndForget(t *testing.T) {
	tr, err := NewTracker(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Stamp("n1"); ok {
		t.Fatalf("Stamp of an unknown member: got found, want not")
	}
	tr.Observe(t0, []messages.Member{mem("n1", alive, 0), mem("n2", alive, 0)})
	tr.Observe(t0.Add(5*time.Second), []messages.Member{mem("n1", alive, 0), mem("n2", alive, 1)})
	for _, tt := range []struct {
		id   string
		want time.Time
	}{
		{"n1", t0},                      // never changed: the first observation
		{"n2", t0.Add(5 * time.Second)}, // the change
	} {
		if got, ok := tr.Stamp(tt.id); !ok || !got.Equal(tt.want) {
			t.Errorf("Stamp(%s): got (%s, %t), want (%s, true)", tt.id, got, ok, tt.want)
		}
	}
	tr.Forget("n1")
	if _, ok := tr.Stamp("n1"); ok || tr.Len() != 1 {
		t.Errorf("after Forget(n1): got Stamp found %t and %d members, want not found and 1", ok, tr.Len())
	}
	// A forgotten member observed again is a new one: no mark dead on the
	// stamp it had before.
	if got := tr.Observe(t0.Add(40*time.Second), []messages.Member{mem("n1", alive, 0), mem("n2", alive, 2)}); len(got) != 0 {
		t.Errorf("first observation after Forget: got %+v, want no transition", got)
	}
	if got, _ := tr.Stamp("n1"); !got.Equal(t0.Add(40 * time.Second)) {
		t.Errorf("Stamp(n1) after Forget and a new observation: got %s, want %s", got, t0.Add(40*time.Second))
	}
	tr.Observe(t0.Add(41*time.Second), nil)
	if tr.Len() != 0 {
		t.Errorf("after observing an empty membership: got %d members, want 0", tr.Len())
	}
}

func TestTrackerDeadFor(t *testing.T) {
	const d = 30 * time.Second
	tests := []struct {
		name  string
		steps []step
		// at is when DeadFor is asked, after the steps.
		at   time.Duration
		want time.Duration
	}{
		{
			name:  "an unknown member",
			at:    d,
			want:  0,
			steps: nil,
		},
		{
			name:  "an alive member, even silent",
			steps: []step{{at: 0, members: []messages.Member{mem("n1", alive, 0)}}},
			at:    10 * d,
			want:  0,
		},
		{
			name: "counted from the first observation that read dead",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", alive, 0)}},
				{at: d, members: []messages.Member{mem("n1", alive, 0)}, want: []Transition{markDead("n1", 0, d)}},
				{at: d + time.Second, members: []messages.Member{mem("n1", dead, 0)}},
				{at: 2 * d, members: []messages.Member{mem("n1", dead, 0)}},
			},
			at:   5 * d,
			want: 4*d - time.Second,
		},
		{
			// rule T1, rule P2: a new leader never counts a death it inherited.
			name:  "a new tracker counts from its own first observation of a dead record",
			steps: []step{{at: 10 * d, members: []messages.Member{mem("n1", dead, 9)}}},
			at:    10*d + time.Minute,
			want:  time.Minute,
		},
		{
			name: "a dead member whose counter moves is not dead any more",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", dead, 0)}},
				{at: 3 * d, members: []messages.Member{mem("n1", dead, 1)}, want: []Transition{markAlive("n1", 1)}},
			},
			at:   4 * d,
			want: 0,
		},
		{
			name: "silent again while the revival is pending: counted afresh",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", dead, 0)}},
				{at: 3 * d, members: []messages.Member{mem("n1", dead, 1)}, want: []Transition{markAlive("n1", 1)}},
				{at: 3*d + time.Second, members: []messages.Member{mem("n1", dead, 1)}},
			},
			at:   4 * d,
			want: d - time.Second,
		},
		{
			name: "reads alive again",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", dead, 0)}},
				{at: d / 2, members: []messages.Member{mem("n1", alive, 0)}},
			},
			at:   d,
			want: 0,
		},
		{
			name: "a removed member",
			steps: []step{
				{at: 0, members: []messages.Member{mem("n1", dead, 0)}},
				{at: d, members: nil},
			},
			at:   2 * d,
			want: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := replay(t, tt.steps)
			if got := tr.DeadFor("n1", t0.Add(tt.at)); got != tt.want {
				t.Errorf("DeadFor(n1) at %s: got %s, want %s", tt.at, got, tt.want)
			}
		})
	}
}

func TestTransitionCommand(t *testing.T) {
	tests := []struct {
		tr   Transition
		want messages.SetMemberStatus
	}{
		{markDead("n1", 7, time.Minute), messages.SetMemberStatus{ID: "n1", Status: dead, IfStatus: alive, IfHeartbeats: ptr(uint64(7))}},
		{markAlive("n1", 8), messages.SetMemberStatus{ID: "n1", Status: alive, IfStatus: dead}},
	}
	for _, tt := range tests {
		if got := tt.tr.Command(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Command of %+v: got %+v, want %+v", tt.tr, got, tt.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		ok   bool
		name string
	}{
		{Config{}.WithDefaults(), true, "defaults"},
		{Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: 10 * time.Second}, true, "three heartbeats per timeout"},
		{Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: 10*time.Second + 1}, false, "fewer than three heartbeats per timeout"},
		{Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: 30 * time.Second}, false, "heartbeat as long as the timeout"},
		{Config{DeadTimeout: 0, HeartbeatInterval: time.Second}, false, "no dead timeout"},
		{Config{DeadTimeout: -time.Second, HeartbeatInterval: time.Second}, false, "negative dead timeout"},
		{Config{DeadTimeout: 30 * time.Second, HeartbeatInterval: 0}, false, "no heartbeat interval"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("%s: Validate(%+v): got %v, want ok %t (errors wrap ErrInvalidConfig)", tt.name, tt.cfg, err, tt.ok)
		}
		if _, nerr := NewTracker(tt.cfg); (nerr == nil) != tt.ok {
			t.Errorf("%s: NewTracker: got %v, want ok %t", tt.name, nerr, tt.ok)
		}
	}
	if got := (Config{}).WithDefaults(); got.DeadTimeout != 30*time.Second || got.HeartbeatInterval != 2*time.Second {
		t.Errorf("WithDefaults: got %+v, want 30s and 2s", got)
	}
}

// BenchmarkObserve is one leader pass over 10,000 members, a tenth of which
// heartbeat between passes, the rest silent but within DeadTimeout.
func BenchmarkObserve(b *testing.B) {
	const n = 10_000
	members := make([]messages.Member, n)
	for i := range members {
		members[i] = mem(fmt.Sprintf("n%05d", i), alive, 0)
	}
	tr, err := NewTracker(testConfig)
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	tr.Observe(now, members)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := i % 10; j < n; j += 10 {
			members[j].Heartbeats++
		}
		now = now.Add(time.Second)
		if got := tr.Observe(now, members); len(got) != 0 {
			b.Fatalf("pass %d: got %d transitions, want none", i, len(got))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/member")
}
