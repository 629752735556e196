package metastore

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/naradmq/narad/messages"
)

func asg(incarnation uint64, partition int, owner, target string) messages.Assignment {
	return messages.Assignment{Topic: "orders", Incarnation: incarnation, Partition: partition, Owner: owner, Target: target}
}

func putCmd(as ...messages.Assignment) messages.AssignCommand {
	return messages.AssignCommand{Version: messages.CommandVersion, PutAssignments: &messages.PutAssignments{Assignments: as}}
}

func deleteAsgCmd(incarnation uint64) messages.AssignCommand {
	return messages.AssignCommand{Version: messages.CommandVersion, DeleteAssignments: &messages.DeleteAssignments{Incarnation: incarnation}}
}

func setTargetCmd(incarnation uint64, partition int, owner, from, to string) messages.AssignCommand {
	return messages.AssignCommand{Version: messages.CommandVersion, SetTarget: &messages.SetTarget{
		Incarnation: incarnation, Partition: partition, Owner: owner, From: from, To: to}}
}

func flipCmd(incarnation uint64, partition int, from, to string) messages.AssignCommand {
	return messages.AssignCommand{Version: messages.CommandVersion, Flip: &messages.Flip{
		Incarnation: incarnation, Partition: partition, From: from, To: to}}
}

// flipAtCmd is a flip that names the HWM the new owner's copy ends at.
func flipAtCmd(incarnation uint64, partition int, from, to string, hwm int64) messages.AssignCommand {
	c := flipCmd(incarnation, partition, from, to)
	c.Flip.HWM = &hwm
	return c
}

// flippedAsg is a settled assignment that records the flip from `from` at hwm.
func flippedAsg(incarnation uint64, partition int, owner, from string, hwm int64) messages.Assignment {
	a := asg(incarnation, partition, owner, "")
	a.FlippedFrom, a.FlippedAtHWM = from, hwm
	return a
}

// rule O1: an assignment is an Owner and a Target that is empty when
// settled; a flip makes the Target the Owner and empties it (the flip
// cases fail when it does not).
func TestAssignStateApply(t *testing.T) {
	tests := []struct {
		name           string
		setup          []messages.AssignCommand
		cmd            messages.AssignCommand
		wantCode       messages.ResultCode
		wantAssignment *messages.Assignment
		// wantAll is the whole shard afterwards, by (incarnation, partition).
		wantAll []messages.Assignment
	}{
		{
			name:     "put creates",
			cmd:      putCmd(asg(7, 1, "n1", ""), asg(7, 0, "n2", "n3")),
			wantCode: messages.ResultOK,
			wantAll:  []messages.Assignment{asg(7, 0, "n2", "n3"), asg(7, 1, "n1", "")},
		},
		{
			name:     "put never overwrites an existing assignment",
			setup:    []messages.AssignCommand{putCmd(asg(7, 0, "n1", ""))},
			cmd:      putCmd(asg(7, 0, "n2", ""), asg(7, 1, "n2", "")),
			wantCode: messages.ResultOK,
			wantAll:  []messages.Assignment{asg(7, 0, "n1", ""), asg(7, 1, "n2", "")},
		},
		{
			name:     "put with an owner-less assignment refuses the whole command",
			cmd:      putCmd(asg(7, 0, "n1", ""), asg(7, 1, "", "")),
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{},
		},
		{
			name:     "put of an assignment targeting its owner is invalid",
			cmd:      putCmd(asg(7, 0, "n1", "n1")),
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{},
		},
		{
			name:     "put without an incarnation is invalid",
			cmd:      putCmd(asg(0, 0, "n1", "")),
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{},
		},
		{
			name:     "delete removes every partition of one incarnation only",
			setup:    []messages.AssignCommand{putCmd(asg(7, 0, "n1", ""), asg(7, 1, "n1", "n2"), asg(9, 0, "n1", ""))},
			cmd:      deleteAsgCmd(7),
			wantCode: messages.ResultOK,
			wantAll:  []messages.Assignment{asg(9, 0, "n1", "")},
		},
		{
			name:     "delete of an absent incarnation is OK",
			setup:    []messages.AssignCommand{putCmd(asg(9, 0, "n1", ""))},
			cmd:      deleteAsgCmd(7),
			wantCode: messages.ResultOK,
			wantAll:  []messages.Assignment{asg(9, 0, "n1", "")},
		},
		{
			name:           "set target on a settled partition",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", ""))},
			cmd:            setTargetCmd(7, 0, "n1", "", "n2"),
			wantCode:       messages.ResultOK,
			wantAssignment: ptr(asg(7, 0, "n1", "n2")),
			wantAll:        []messages.Assignment{asg(7, 0, "n1", "n2")},
		},
		{
			name:           "set target to empty clears a move (abort)",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2"))},
			cmd:            setTargetCmd(7, 0, "n1", "n2", ""),
			wantCode:       messages.ResultOK,
			wantAssignment: ptr(asg(7, 0, "n1", "")),
			wantAll:        []messages.Assignment{asg(7, 0, "n1", "")},
		},
		{
			name:           "set target refused when the target moved on",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n3"))},
			cmd:            setTargetCmd(7, 0, "n1", "n2", ""),
			wantCode:       messages.ResultRefused,
			wantAssignment: ptr(asg(7, 0, "n1", "n3")),
			wantAll:        []messages.Assignment{asg(7, 0, "n1", "n3")},
		},
		{
			name:           "set target refused when the owner changed",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n2", ""))},
			cmd:            setTargetCmd(7, 0, "n1", "", "n3"),
			wantCode:       messages.ResultRefused,
			wantAssignment: ptr(asg(7, 0, "n2", "")),
			wantAll:        []messages.Assignment{asg(7, 0, "n2", "")},
		},
		{
			name:     "set target of an absent partition is not found",
			setup:    []messages.AssignCommand{putCmd(asg(7, 0, "n1", ""))},
			cmd:      setTargetCmd(7, 1, "n1", "", "n2"),
			wantCode: messages.ResultNotFound,
			wantAll:  []messages.Assignment{asg(7, 0, "n1", "")},
		},
		{
			name:     "set target to the owner is invalid",
			setup:    []messages.AssignCommand{putCmd(asg(7, 0, "n1", ""))},
			cmd:      setTargetCmd(7, 0, "n1", "", "n1"),
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{asg(7, 0, "n1", "")},
		},
		{
			// rule O3
			name:           "flip moves the owner to the target and clears it",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2"))},
			cmd:            flipCmd(7, 0, "n1", "n2"),
			wantCode:       messages.ResultOK,
			wantAssignment: ptr(asg(7, 0, "n2", "")),
			wantAll:        []messages.Assignment{asg(7, 0, "n2", "")},
		},
		{
			// rule O4
			name:           "a retried flip that already applied answers OK",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2")), flipCmd(7, 0, "n1", "n2")},
			cmd:            flipCmd(7, 0, "n1", "n2"),
			wantCode:       messages.ResultOK,
			wantAssignment: ptr(asg(7, 0, "n2", "")),
			wantAll:        []messages.Assignment{asg(7, 0, "n2", "")},
		},
		{
			// rule O3
			name:           "flip refused when the move was re-planned to another node",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n3"))},
			cmd:            flipCmd(7, 0, "n1", "n2"),
			wantCode:       messages.ResultRefused,
			wantAssignment: ptr(asg(7, 0, "n1", "n3")),
			wantAll:        []messages.Assignment{asg(7, 0, "n1", "n3")},
		},
		{
			// The old owner checks its HWM against the one the flip names.
			name:           "a flip that names the copy's HWM records it with the old owner",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2"))},
			cmd:            flipAtCmd(7, 0, "n1", "n2", 42),
			wantCode:       messages.ResultOK,
			wantAssignment: ptr(flippedAsg(7, 0, "n2", "n1", 42)),
			wantAll:        []messages.Assignment{flippedAsg(7, 0, "n2", "n1", 42)},
		},
		{
			name:           "a flip at HWM 0 is recorded too",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2"))},
			cmd:            flipAtCmd(7, 0, "n1", "n2", 0),
			wantCode:       messages.ResultOK,
			wantAssignment: ptr(flippedAsg(7, 0, "n2", "n1", 0)),
			wantAll:        []messages.Assignment{flippedAsg(7, 0, "n2", "n1", 0)},
		},
		{
			name: "a later flip without an HWM forgets the earlier record",
			setup: []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2")), flipAtCmd(7, 0, "n1", "n2", 42),
				setTargetCmd(7, 0, "n2", "", "n3")},
			cmd:            flipCmd(7, 0, "n2", "n3"),
			wantCode:       messages.ResultOK,
			wantAssignment: ptr(asg(7, 0, "n3", "")),
			wantAll:        []messages.Assignment{asg(7, 0, "n3", "")},
		},
		{
			name:           "a refused flip leaves the record of the last one",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2")), flipAtCmd(7, 0, "n1", "n2", 42)},
			cmd:            flipAtCmd(7, 0, "n1", "n3", 50),
			wantCode:       messages.ResultRefused,
			wantAssignment: ptr(flippedAsg(7, 0, "n2", "n1", 42)),
			wantAll:        []messages.Assignment{flippedAsg(7, 0, "n2", "n1", 42)},
		},
		{
			name:           "flip refused when the move was aborted",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n1", ""))},
			cmd:            flipCmd(7, 0, "n1", "n2"),
			wantCode:       messages.ResultRefused,
			wantAssignment: ptr(asg(7, 0, "n1", "")),
			wantAll:        []messages.Assignment{asg(7, 0, "n1", "")},
		},
		{
			name:           "flip refused when the owner is not the source",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n4", "n2"))},
			cmd:            flipCmd(7, 0, "n1", "n2"),
			wantCode:       messages.ResultRefused,
			wantAssignment: ptr(asg(7, 0, "n4", "n2")),
			wantAll:        []messages.Assignment{asg(7, 0, "n4", "n2")},
		},
		{
			name:           "flip to the owner with a new move planned is refused, showing the owner",
			setup:          []messages.AssignCommand{putCmd(asg(7, 0, "n2", "n3"))},
			cmd:            flipCmd(7, 0, "n1", "n2"),
			wantCode:       messages.ResultRefused,
			wantAssignment: ptr(asg(7, 0, "n2", "n3")),
			wantAll:        []messages.Assignment{asg(7, 0, "n2", "n3")},
		},
		{
			name:     "flip of a deleted topic's partition is not found",
			setup:    []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2")), deleteAsgCmd(7)},
			cmd:      flipCmd(7, 0, "n1", "n2"),
			wantCode: messages.ResultNotFound,
			wantAll:  []messages.Assignment{},
		},
		{
			name:     "flip to the source itself is invalid",
			setup:    []messages.AssignCommand{putCmd(asg(7, 0, "n1", "n2"))},
			cmd:      flipCmd(7, 0, "n1", "n1"),
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{asg(7, 0, "n1", "n2")},
		},
		{
			name:     "a command naming nothing is invalid",
			cmd:      messages.AssignCommand{Version: messages.CommandVersion},
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{},
		},
		{
			name: "a command naming two things is invalid",
			cmd: messages.AssignCommand{Version: messages.CommandVersion,
				PutAssignments: &messages.PutAssignments{Assignments: []messages.Assignment{asg(7, 0, "n1", "")}},
				Flip:           &messages.Flip{Incarnation: 7, From: "n1", To: "n2"}},
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAssignState()
			for i, c := range tt.setup {
				if r := s.apply(c, uint64(i+1)); r.Code != messages.ResultOK {
					t.Fatalf("setup step %d: got code %d, want OK", i+1, r.Code)
				}
			}
			index := uint64(len(tt.setup) + 1)
			r := s.apply(tt.cmd, index)
			if r.Code != tt.wantCode {
				t.Errorf("code: got %d, want %d", r.Code, tt.wantCode)
			}
			// TargetSince has a test of its own (targetsince_test.go).
			if r.Assignment != nil {
				r.Assignment.TargetSince = 0
			}
			if !reflect.DeepEqual(r.Assignment, tt.wantAssignment) {
				t.Errorf("result assignment:\n got %+v\nwant %+v", r.Assignment, tt.wantAssignment)
			}
			got := s.all()
			for i := range got {
				got[i].TargetSince = 0
			}
			if !reflect.DeepEqual(got, tt.wantAll) {
				t.Errorf("assignments after:\n got %+v\nwant %+v", got, tt.wantAll)
			}
			checkIndexes(t, s)
			if s.appliedIndex() != index {
				t.Errorf("applied index: got %d, want %d", s.appliedIndex(), index)
			}
		})
	}
}

// checkIndexes proves the owner and target indexes agree with the data.
func checkIndexes(t *testing.T, s *assignState) {
	t.Helper()
	wantOwned := map[string][]messages.Assignment{}
	wantTargeted := map[string][]messages.Assignment{}
	var wantMoving []messages.Assignment
	for _, a := range s.all() {
		wantOwned[a.Owner] = append(wantOwned[a.Owner], a)
		if a.Target != "" {
			wantTargeted[a.Target] = append(wantTargeted[a.Target], a)
			wantMoving = append(wantMoving, a)
		}
	}
	if got := s.moving(); !reflect.DeepEqual(got, wantMoving) {
		t.Errorf("moving: got %+v, want %+v", got, wantMoving)
	}
	for _, node := range []string{"n1", "n2", "n3", "n4"} {
		if got, want := s.ownedBy(node), wantOwned[node]; len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Errorf("ownedBy(%s): got %+v, want %+v", node, got, want)
		}
		if got, want := s.targetedAt(node), wantTargeted[node]; len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Errorf("targetedAt(%s): got %+v, want %+v", node, got, want)
		}
	}
	for node, keys := range s.owned {
		for k, e := range keys {
			if a, _ := s.get(k.incarnation, k.partition); e.topic != a.Topic || e.targeted != (a.Target != "") {
				t.Errorf("owner index of %s at %+v: got %+v, want topic %q, targeted %v", node, k, e, a.Topic, a.Target != "")
			}
		}
	}
	if len(s.owned) != len(wantOwned) || len(s.targeted) != len(wantTargeted) {
		t.Errorf("index sizes: got %d owners and %d targets, want %d and %d", len(s.owned), len(s.targeted), len(wantOwned), len(wantTargeted))
	}
}

func TestAssignStateApplyEntry(t *testing.T) {
	s := newAssignState()
	if r, err := s.applyEntry([]byte("{"), 1); err != nil || r.Code != messages.ResultInvalid {
		t.Errorf("garbage entry: got (%d, %v), want (ResultInvalid, nil)", r.Code, err)
	}
	newer, _ := json.Marshal(messages.AssignCommand{Version: messages.CommandVersion + 1, DeleteAssignments: &messages.DeleteAssignments{Incarnation: 1}})
	if _, err := s.applyEntry(newer, 2); err == nil || !strings.Contains(err.Error(), "command version") {
		t.Errorf("newer version: got error %v, want a command version error", err)
	}
	// The version this binary writes is one it applies.
	current, _ := json.Marshal(putCmd(asg(1, 0, "n1", "")))
	if r, err := s.applyEntry(current, 3); err != nil || r.Code != messages.ResultOK {
		t.Errorf("entry of the current version: got (%d, %v), want (ResultOK, nil)", r.Code, err)
	}
	if got, ok := s.get(1, 0); !ok || got != asg(1, 0, "n1", "") {
		t.Errorf("assignment after the current-version entry: got (%+v, %t), want (%+v, true)", got, ok, asg(1, 0, "n1", ""))
	}
	if s.appliedIndex() != 3 {
		t.Errorf("applied index: got %d, want 3", s.appliedIndex())
	}
}

// assignHistory is a mixed log for the determinism and snapshot tests.
func assignHistory() []messages.AssignCommand {
	nodes := []string{"n1", "n2", "n3"}
	var h []messages.AssignCommand
	for inc := uint64(1); inc <= 3; inc++ {
		var as []messages.Assignment
		for p := range 20 {
			as = append(as, asg(inc, p, nodes[p%3], ""))
		}
		h = append(h, putCmd(as...))
	}
	for p := range 20 {
		from, to := nodes[p%3], nodes[(p+1)%3]
		h = append(h, setTargetCmd(2, p, from, "", to))
		if p%2 == 0 {
			h = append(h, flipCmd(2, p, from, to))
		}
		if p%5 == 0 {
			h = append(h, flipCmd(2, p, from, nodes[(p+2)%3])) // refused
		}
	}
	h = append(h, deleteAsgCmd(3))
	return h
}

func TestAssignStateDeterministicSnapshot(t *testing.T) {
	a, restored := replayTwiceAndRestore(t, newAssignState, func(s *assignState, c messages.AssignCommand, i uint64) any { return s.apply(c, i) }, loadAssignState, assignHistory())
	checkIndexes(t, restored)
	if got, want := len(restored.all()), 40; got != want {
		t.Errorf("restored assignments: got %d, want %d", got, want)
	}
	next := flipCmd(2, 1, "n2", "n3")
	if ra, rr := a.apply(next, 500), restored.apply(next, 500); !reflect.DeepEqual(ra, rr) {
		t.Errorf("apply after restore: got %+v, want %+v", rr, ra)
	}
}

func TestLoadAssignStateRefusesBadSnapshots(t *testing.T) {
	for _, snap := range []string{
		`[]`,
		`{"format":9,"index":1,"assignments":[]}`,
		`{"format":1,"index":1,"assignments":[{"incarnation":1,"partition":0,"owner":"a"},{"incarnation":1,"partition":0,"owner":"b"}]}`,
	} {
		if _, err := loadAssignState(strings.NewReader(snap)); err == nil {
			t.Errorf("loadAssignState(%s): got nil error, want one", snap)
		}
	}
}

func TestAssignStateLookup(t *testing.T) {
	s := newAssignState()
	s.apply(putCmd(asg(7, 0, "n1", "n2"), asg(7, 1, "n2", "")), 1)
	tests := []struct {
		query any
		want  any
	}{
		{assignmentQuery{incarnation: 7, partition: 0}, assignmentAnswer{assignment: asg(7, 0, "n1", "n2"), found: true}},
		{assignmentQuery{incarnation: 7, partition: 5}, assignmentAnswer{}},
		{ownedQuery{node: "n2"}, []messages.Assignment{asg(7, 1, "n2", "")}},
		{targetedQuery{node: "n2"}, []messages.Assignment{asg(7, 0, "n1", "n2")}},
		{appliedQuery{}, uint64(1)},
	}
	for _, tt := range tests {
		got, err := s.lookup(tt.query)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("lookup(%#v): got (%+v, %v), want (%+v, nil)", tt.query, got, err, tt.want)
		}
	}
	if _, err := s.lookup(topicQuery{}); err == nil {
		t.Errorf("lookup of a topic query on an assignment shard: got nil error, want one")
	}
}

func flipsCmd(fs ...messages.Flip) messages.AssignCommand {
	return messages.AssignCommand{Version: messages.CommandVersion, Flips: &messages.Flips{Flips: fs}}
}

// A Flips entry judges each flip on its own, in order (rules O3, O4 per
// flip): one refused or unknown partition does not stop the others.
func TestAssignStateApplyFlips(t *testing.T) {
	f := func(partition int, from, to string) messages.Flip {
		return messages.Flip{Incarnation: 7, Partition: partition, From: from, To: to}
	}
	tooMany := make([]messages.Flip, maxFlipsPerEntry+1)
	for i := range tooMany {
		tooMany[i] = f(i, "n1", "n2")
	}
	// A batch of exactly maxFlipsPerEntry: the four set up below, then
	// partitions that do not exist.
	atBound := make([]messages.Flip, maxFlipsPerEntry)
	atBoundCodes := make([]messages.ResultCode, maxFlipsPerEntry)
	for i := range atBound {
		atBound[i], atBoundCodes[i] = f(i, "n1", "n2"), messages.ResultNotFound
	}
	copy(atBoundCodes, []messages.ResultCode{messages.ResultOK, messages.ResultRefused, messages.ResultOK, messages.ResultOK})
	setup := putCmd(asg(7, 0, "n1", "n2"), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n1", "n2"))
	tests := []struct {
		name      string
		cmd       messages.AssignCommand
		wantCode  messages.ResultCode
		wantFlips []messages.ResultCode
		wantAll   []messages.Assignment
	}{
		{
			name:     "each flip is its own compare-and-swap",
			cmd:      flipsCmd(f(0, "n1", "n2"), f(1, "n1", "n2"), f(2, "n1", "n2"), f(9, "n1", "n2"), f(3, "n1", "n1")),
			wantCode: messages.ResultOK,
			// applied; re-planned to n3: refused; already applied: OK; no
			// such partition; From == To: invalid.
			wantFlips: []messages.ResultCode{messages.ResultOK, messages.ResultRefused, messages.ResultOK, messages.ResultNotFound, messages.ResultInvalid},
			wantAll:   []messages.Assignment{asg(7, 0, "n2", ""), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n1", "n2")},
		},
		{
			name:     "an empty batch is invalid",
			cmd:      flipsCmd(),
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{asg(7, 0, "n1", "n2"), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n1", "n2")},
		},
		{
			name:      "a batch at the bound applies",
			cmd:       flipsCmd(atBound...),
			wantCode:  messages.ResultOK,
			wantFlips: atBoundCodes,
			wantAll:   []messages.Assignment{asg(7, 0, "n2", ""), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n2", "")},
		},
		{
			name:     "a batch past the bound is invalid as a whole and changes nothing",
			cmd:      flipsCmd(tooMany...),
			wantCode: messages.ResultInvalid,
			wantAll:  []messages.Assignment{asg(7, 0, "n1", "n2"), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n1", "n2")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAssignState()
			if r := s.apply(setup, 1); r.Code != messages.ResultOK {
				t.Fatalf("setup: got code %d, want OK", r.Code)
			}
			r := s.apply(tt.cmd, 2)
			if r.Code != tt.wantCode {
				t.Fatalf("code: got %d, want %d", r.Code, tt.wantCode)
			}
			var got []messages.ResultCode
			for _, fr := range r.Flips {
				got = append(got, fr.Code)
			}
			if !reflect.DeepEqual(got, tt.wantFlips) {
				t.Errorf("flip codes: got %v, want %v", got, tt.wantFlips)
			}
			if all := s.all(); !reflect.DeepEqual(all, tt.wantAll) {
				t.Errorf("assignments after:\n got %+v\nwant %+v", all, tt.wantAll)
			}
			checkIndexes(t, s)
		})
	}
}

func setTargetsCmd(ts ...messages.SetTarget) messages.AssignCommand {
	return messages.AssignCommand{Version: messages.TargetsCommandVersion, SetTargets: &messages.SetTargets{Targets: ts}}
}

// A SetTargets entry judges each target compare-and-swap on its own, in
// order, as many SetTarget entries would: one refused pick does not stop
// the others, and each set target names the entry that set it.
func TestAssignStateApplySetTargets(t *testing.T) {
	st := func(partition int, owner, from, to string) messages.SetTarget {
		return messages.SetTarget{Incarnation: 7, Partition: partition, Owner: owner, From: from, To: to}
	}
	tooMany := make([]messages.SetTarget, maxTargetsPerEntry+1)
	for i := range tooMany {
		tooMany[i] = st(i, "n1", "", "n2")
	}
	setup := putCmd(asg(7, 0, "n1", ""), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n1", "n2"))
	before := []messages.Assignment{asg(7, 0, "n1", ""), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n1", "n2")}
	moving := func(a messages.Assignment, since uint64) messages.Assignment {
		a.TargetSince = since
		return a
	}
	tests := []struct {
		name        string
		cmd         messages.AssignCommand
		wantCode    messages.ResultCode
		wantTargets []messages.ResultCode
		wantAll     []messages.Assignment
	}{
		{
			name: "each target is its own compare-and-swap",
			cmd: setTargetsCmd(st(0, "n1", "", "n2"), st(1, "n1", "", "n2"), st(2, "n1", "", "n3"),
				st(9, "n1", "", "n2"), st(3, "n1", "n2", ""), st(0, "n1", "n2", "n1")),
			wantCode: messages.ResultOK,
			// set; already aimed at n3: refused; owner moved on: refused;
			// no such partition; cleared; To == Owner: invalid.
			wantTargets: []messages.ResultCode{messages.ResultOK, messages.ResultRefused, messages.ResultRefused,
				messages.ResultNotFound, messages.ResultOK, messages.ResultInvalid},
			wantAll: []messages.Assignment{moving(asg(7, 0, "n1", "n2"), 2), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n1", "")},
		},
		{
			name:        "later items see the earlier ones of the same entry",
			cmd:         setTargetsCmd(st(0, "n1", "", "n2"), st(0, "n1", "n2", "n3")),
			wantCode:    messages.ResultOK,
			wantTargets: []messages.ResultCode{messages.ResultOK, messages.ResultOK},
			wantAll:     []messages.Assignment{moving(asg(7, 0, "n1", "n3"), 2), asg(7, 1, "n1", "n3"), asg(7, 2, "n2", ""), asg(7, 3, "n1", "n2")},
		},
		{
			name:     "an empty batch is invalid",
			cmd:      setTargetsCmd(),
			wantCode: messages.ResultInvalid,
			wantAll:  before,
		},
		{
			name:     "a batch past the bound is invalid as a whole and changes nothing",
			cmd:      setTargetsCmd(tooMany...),
			wantCode: messages.ResultInvalid,
			wantAll:  before,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAssignState()
			if r := s.apply(setup, 1); r.Code != messages.ResultOK {
				t.Fatalf("setup: got code %d, want OK", r.Code)
			}
			r := s.apply(tt.cmd, 2)
			if r.Code != tt.wantCode {
				t.Fatalf("code: got %d, want %d", r.Code, tt.wantCode)
			}
			var got []messages.ResultCode
			for _, tr := range r.Targets {
				got = append(got, tr.Code)
			}
			if !reflect.DeepEqual(got, tt.wantTargets) {
				t.Errorf("target codes: got %v, want %v", got, tt.wantTargets)
			}
			if all := s.all(); !reflect.DeepEqual(all, tt.wantAll) {
				t.Errorf("assignments after:\n got %+v\nwant %+v", all, tt.wantAll)
			}
			checkIndexes(t, s)
		})
	}
}

// firstSettled lists only partitions the node owns with no target, and
// stops at k; the owner index still counts every one it owns.
func TestAssignStateFirstSettled(t *testing.T) {
	s := newAssignState()
	s.apply(putCmd(asg(7, 0, "n1", "n2"), asg(7, 1, "n1", ""), asg(7, 2, "n1", ""), asg(7, 3, "n2", ""), asg(7, 4, "n1", "n3")), 1)
	if got := len(s.owned["n1"]); got != 4 {
		t.Fatalf("n1 owns: got %d, want 4", got)
	}
	for _, tc := range []struct{ k, want int }{{0, 0}, {1, 1}, {2, 2}, {10, 2}} {
		got := s.firstSettled("n1", tc.k, nil)
		if len(got) != tc.want {
			t.Fatalf("k=%d: got %d assignments, want %d", tc.k, len(got), tc.want)
		}
		for _, key := range got {
			if a, _ := s.get(key.Incarnation, key.Partition); a.Owner != "n1" || a.Target != "" || a.Topic != key.Topic {
				t.Fatalf("k=%d: got %+v (%+v), want one n1 owns with no target", tc.k, key, a)
			}
		}
	}
}

// The partitions of one topic share one copy of its name in a shard, each
// decoded from its own entry (issue 50: a copy each was 300,000 names).
func TestTheAssignmentsOfATopicShareItsName(t *testing.T) {
	s := newAssignState()
	for i, p := range []int{0, 1, 2} {
		data, err := json.Marshal(putCmd(asg(7, p, "n1", "")))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := s.applyEntry(data, uint64(i+1)); err != nil || r.Code != messages.ResultOK {
			t.Fatalf("put partition %d: got %+v, %v, want OK", p, r, err)
		}
	}
	first, _ := s.get(7, 0)
	for p := 1; p < 3; p++ {
		a, _ := s.get(7, p)
		if a.Topic != first.Topic || unsafe.StringData(a.Topic) != unsafe.StringData(first.Topic) {
			t.Fatalf("partition %d: topic %q at %p, want %q at %p (one copy)", p, a.Topic, unsafe.StringData(a.Topic), first.Topic, unsafe.StringData(first.Topic))
		}
		key := partKey{7, p}
		if e := s.owned["n1"][key]; unsafe.StringData(e.topic) != unsafe.StringData(first.Topic) {
			t.Fatalf("partition %d: owner index holds another copy of the topic's name", p)
		}
	}
}

// The oldest encoding still applies: a Raft log written by the first
// release (version 1) replays on this binary; version 0 (no version) is
// refused.
func TestTheFirstCommandVersionStillApplies(t *testing.T) {
	s := newAssignState()
	v1 := putCmd(asg(1, 0, "n1", ""))
	v1.Version = 1
	if r := s.apply(v1, 1); r.Code != messages.ResultOK {
		t.Fatalf("a version 1 assignment command: got code %d, want OK", r.Code)
	}
	v0 := putCmd(asg(1, 1, "n1", ""))
	v0.Version = 0
	if r := s.apply(v0, 2); r.Code != messages.ResultInvalid {
		t.Fatalf("a command with no version: got code %d, want invalid", r.Code)
	}
	m := newMetaState()
	c := createCmd("t", 1)
	c.Version = 1
	if r := m.apply(c, 1); r.Code != messages.ResultOK {
		t.Fatalf("a version 1 topic create: got code %d, want OK", r.Code)
	}
}

// The owner journal names a partition when its owner changes (created,
// flipped), not when only its target does.
func TestTheOwnerJournalNamesOwnerChangesOnly(t *testing.T) {
	s := newAssignState()
	count := func() int {
		n := 0
		s.owners.since(0, func(partKey) { n++ })
		return n
	}
	steps := []struct {
		what string
		cmd  messages.AssignCommand
		want int
	}{
		{"created", putCmd(asg(1, 0, "n1", "")), 1},
		{"targeted", setTargetCmd(1, 0, "n1", "", "n2"), 1},
		{"flipped", flipCmd(1, 0, "n1", "n2"), 2},
	}
	for i, st := range steps {
		if r := s.apply(st.cmd, uint64(i+1)); r.Code != messages.ResultOK {
			t.Fatalf("%s: got code %d, want OK", st.what, r.Code)
		}
		if got := count(); got != st.want {
			t.Fatalf("journal after %s: got %d changes, want %d", st.what, got, st.want)
		}
	}
}
