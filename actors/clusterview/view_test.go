package clusterview

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// A gather spends half of what is left of the caller's budget, at most
// RequestTimeout, so that a member that hangs costs the answer its share.
func TestTheFanOutBudgetIsHalfOfWhatIsLeftAtMostRequestTimeout(t *testing.T) {
	clk := testnet.NewClock()
	v := New(Deps{RequestTimeout: 10 * time.Second, Clock: clk})
	if got := v.FanOutBudget(t.Context()); got != 10*time.Second {
		t.Fatalf("no deadline: got %v, want RequestTimeout", got)
	}
	ctx, cancel := context.WithDeadline(t.Context(), clk.Now().Add(4*time.Second))
	defer cancel()
	if got := v.FanOutBudget(ctx); got != 2*time.Second {
		t.Fatalf("4s left: got %v, want 2s", got)
	}
	long, cancelLong := context.WithDeadline(t.Context(), clk.Now().Add(time.Minute))
	defer cancelLong()
	if got := v.FanOutBudget(long); got != 10*time.Second {
		t.Fatalf("a minute left: got %v, want RequestTimeout", got)
	}
}

// Without NATS nobody else can be asked: each member is named with why.
func TestAskEachWithoutNATSNamesEveryMember(t *testing.T) {
	answers, errs := askEach[messages.MoveCounts](t.Context(), nil, []string{"n2", "n3"}, moveCountsService, struct{}{}, time.Second)
	if len(answers) != 0 || len(errs) != 2 || errs["n2"] == nil || errs["n3"] == nil {
		t.Fatalf("got %v answers and %v, want none and both named", answers, errs)
	}
}

// Rule T5: a move listing says why a move might need an abort.
func TestRuleT5AMoveListingSaysWhyAMoveIsBlocked(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     []string
	}{
		{"alive", "alive", nil},
		{"dead", "alive", []string{"source_dead"}},
		{"not_a_member", "dead", []string{"source_dead", "target_dead"}},
		{"draining", "not_a_member", []string{"target_not_member"}},
	} {
		if got := movesBlockedReasons(tc.from, tc.to); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s to %s: got %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
