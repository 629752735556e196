package clusterview

import (
	"reflect"
	"testing"

	"github.com/naradmq/narad/messages"
)

func TestSumMoveCountsAddsTheNodesAndNamesTheSilentOnes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counts   map[string]messages.MoveCounts
		asked    []string
		inFlight int
		want     messages.MoveSummary
	}{
		{"this node alone", map[string]messages.MoveCounts{"n1": {Done: 3, BytesCopied: 10, Frozen: 2, Held: 1}}, nil, 4,
			messages.MoveSummary{Done: 3, InFlight: 4, Held: 1, Frozen: 2, BytesCopied: 10, Nodes: 1}},
		{"three nodes", map[string]messages.MoveCounts{"n1": {Done: 3, BytesCopied: 10}, "n2": {Done: 4, BytesCopied: 20, Frozen: 128, Held: 7}, "n3": {Done: 1, Frozen: 1}},
			[]string{"n2", "n3"}, 9, messages.MoveSummary{Done: 8, InFlight: 9, Held: 7, Frozen: 129, BytesCopied: 30, Nodes: 3}},
		{"two silent", map[string]messages.MoveCounts{"n1": {Done: 3}}, []string{"n4", "n2"}, 0,
			messages.MoveSummary{Done: 3, Nodes: 1, Missing: []string{"n2", "n4"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sumMoveCounts(tc.counts, tc.asked, tc.inFlight); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
