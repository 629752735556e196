package mover

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/messages"
)

// syncEdge runs Effects' work at once and keeps the events it answers.
type syncEdge struct{ events []any }

func (e *syncEdge) Now() time.Duration       { return time.Second }
func (e *syncEdge) Time() time.Time          { return time.Time{} }
func (e *syncEdge) After(time.Duration, any) {}
func (e *syncEdge) Note(any)                 {}
func (e *syncEdge) Go(_ bool, work func(context.Context, func(any))) {
	work(context.Background(), func(ev any) { e.events = append(e.events, ev) })
}

// fenceSource answers every handoff with status, and counts the fences
// it was asked after the first event (the worker's acceptance) came back.
type fenceSource struct {
	status messages.Status
	edge   *syncEdge
	asked  []messages.Handoff
	late   int
}

func (s *fenceSource) Handoff(_ context.Context, h messages.Handoff, alone bool, done func(*messages.HandoffResult, error)) {
	s.asked = append(s.asked, h)
	if len(s.edge.events) > 0 {
		s.late++
	}
	if h.Op == messages.HandoffFence && !alone {
		done(nil, errors.New("a fence sent in a group"))
		return
	}
	done(&messages.HandoffResult{Status: s.status}, nil)
}

func (s *fenceSource) List(context.Context, bool, func(*messages.PartitionListing, error)) {
	panic("no listing in a fence")
}

// rule F9: the fence presents the token with the copy's HWM, alone, and
// its answer is the source's: accepted, refused (the freeze is gone: the
// worker freezes again), or unavailable (no answer: asked again). With
// Knobs.TrustFence, the break the simulator's seed finds, the worker
// takes it as accepted before the source was asked.
func TestRuleF9AFenceIsAcceptedOnlyByTheSourcesAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  messages.Status
		trust   bool
		refused bool
		unavail bool
	}{
		{"accepted", messages.StatusOK, false, false, false},
		{"refused: the freeze is gone", messages.StatusGone, false, true, false},
		{"unavailable", messages.StatusUnavailable, false, false, true},
		{"refused, but trusted (the break)", messages.StatusGone, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edge := &syncEdge{}
			src := &fenceSource{status: tc.status, edge: edge}
			x := &Effects{Key: messages.PartitionKey{Topic: "t", Incarnation: 1}, NodeID: "n2", Source: "n1",
				Logger: slog.New(slog.DiscardHandler), Knobs: Knobs{TrustFence: tc.trust}, Edge: edge, Peer: src}
			x.Do(move.State{}, move.Fence{Token: "tok", HWM: 7, Attempt: 3})
			if len(edge.events) != 1 {
				t.Fatalf("got events %+v, want one answer", edge.events)
			}
			got, ok := x.Absorb(move.State{}, edge.events[0]).(move.Fenced)
			if !ok {
				t.Fatalf("got %T, want move.Fenced", edge.events[0])
			}
			if got.Refused != tc.refused || (got.Err != nil) != tc.unavail || got.Attempt != 3 || got.SentAt != time.Second {
				t.Fatalf("got %+v, want refused %v, unavailable %v, attempt 3, sent at 1s", got, tc.refused, tc.unavail)
			}
			if tc.unavail && !errors.Is(got.Err, errs.ErrUnavailable) {
				t.Fatalf("got err %v, want one wrapping errs.ErrUnavailable", got.Err)
			}
			if len(src.asked) != 1 || src.asked[0].Op != messages.HandoffFence || src.asked[0].Token != "tok" || src.asked[0].HWM != 7 {
				t.Fatalf("source asked %+v, want one fence of tok at HWM 7", src.asked)
			}
			if trustedEarly := src.late == 1; trustedEarly != tc.trust {
				t.Fatalf("fence asked after the worker took it as accepted: %v, want %v", trustedEarly, tc.trust)
			}
		})
	}
}
