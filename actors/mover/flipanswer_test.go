package mover

import (
	"context"
	"fmt"
	"testing"

	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// flipAnswerStore answers every flip with code, or with err.
type flipAnswerStore struct {
	Store
	code messages.ResultCode
	err  error
	got  messages.Flip
}

func (s *flipAnswerStore) Flip(_ context.Context, c messages.Flip) (messages.AssignResult, error) {
	s.got = c
	return messages.AssignResult{Code: s.code}, s.err
}

// rule X4, as this design has it: the leader's answer to a flip is the
// assignment state machine's code, a refusal (409) and a partition with no
// assignment (404) each an answer the move ends on (rule X6), and anything
// else (the proposal timed out, no leader, a dropped entry: 503) an
// unknown outcome, kept apart so the worker asks the leader (rule X1)
// rather than end a move whose flip may have committed.
func TestRuleX4AFlipsAnswerIsRefusedMissingOrUnknown(t *testing.T) {
	for _, tc := range []struct {
		name        string
		code        messages.ResultCode
		err         error
		want        move.FlipCode
		wantUnknown bool
	}{
		{"committed", messages.ResultOK, nil, move.FlipOK, false},
		{"refused: 409", messages.ResultRefused, nil, move.FlipRefused, false},
		{"no assignment: 404", messages.ResultNotFound, nil, move.FlipNotFound, false},
		{"malformed: refused", messages.ResultInvalid, nil, move.FlipRefused, false},
		{"no leader: 503", messages.ResultOK, fmt.Errorf("propose: %w", metastore.ErrUnavailable), 0, true},
		{"timed out: 503", messages.ResultOK, context.DeadlineExceeded, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &flipAnswerStore{code: tc.code, err: tc.err}
			k := messages.PartitionKey{Topic: "t", Incarnation: 4, Partition: 2}
			d := testDeps("")
			x := &Effects{Key: k, NodeID: "n2", Source: "n1", Since: 9, Meta: metaPort{store: s, key: k, timeout: d.RequestTimeout}}
			var ev any
			x.flip(context.Background(), 104, 3, func(e any) { ev = e })
			got, ok := ev.(move.FlipAnswered)
			if !ok {
				t.Fatalf("flip answered %T, want move.FlipAnswered", got)
			}
			if (got.Err != nil) != tc.wantUnknown {
				t.Fatalf("unknown outcome: got err %v, want unknown %v", got.Err, tc.wantUnknown)
			}
			if !tc.wantUnknown && got.Code != tc.want {
				t.Fatalf("code: got %v, want %v", got.Code, tc.want)
			}
			if got.Attempt != 3 {
				t.Fatalf("attempt: got %d, want 3", got.Attempt)
			}
			f := s.got
			if f.From != "n1" || f.To != "n2" || f.HWM == nil || *f.HWM != 104 || f.TargetSince != 9 || f.Partition != 2 || f.Incarnation != 4 {
				t.Fatalf("flip proposed: got %+v, want n1 to n2 at HWM 104 for 4/2 since 9", f)
			}
		})
	}
}
