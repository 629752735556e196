package proc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestForEachStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var ran atomic.Int64
	items := make([]int, 1000)
	err := ForEach(context.Background(), items, 2, func(ctx context.Context, _ int) error {
		if ran.Add(1) == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("got %v, want boom", err)
	}
	if n := ran.Load(); n >= int64(len(items)) {
		t.Errorf("ran %d items, want fewer than %d after the error", n, len(items))
	}
}
