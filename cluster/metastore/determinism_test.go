package metastore

import (
	"bytes"
	"io"
	"reflect"
	"testing"
)

// replayTwiceAndRestore applies history to two fresh states and requires
// equal results and byte-identical snapshots (determinism), then restores
// a third state from the snapshot and requires it to snapshot identically.
// It returns the first state and the restored one for further checks.
func replayTwiceAndRestore[S core, C any](t *testing.T, fresh func() S, apply func(S, C, uint64) any, load func(io.Reader) (S, error), history []C) (S, S) {
	t.Helper()
	a, b := fresh(), fresh()
	for i, c := range history {
		ra, rb := apply(a, c, uint64(i+1)), apply(b, c, uint64(i+1))
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("entry %d: results differ: %+v vs %+v", i+1, ra, rb)
		}
	}
	var sa, sb bytes.Buffer
	if err := a.save(&sa); err != nil {
		t.Fatal(err)
	}
	if err := b.save(&sb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sa.Bytes(), sb.Bytes()) {
		t.Fatalf("snapshots differ:\n%s\n%s", sa.Bytes(), sb.Bytes())
	}
	restored, err := load(bytes.NewReader(sa.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var sr bytes.Buffer
	if err := restored.save(&sr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sa.Bytes(), sr.Bytes()) {
		t.Errorf("snapshot of a restored state:\n got %s\nwant %s", sr.Bytes(), sa.Bytes())
	}
	return a, restored
}
