package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// flagNode records the flags and wait the handlers passed on.
type flagNode struct {
	*fakeNode
	calls  int
	dryRun bool
	detail bool
	wait   time.Duration
}

func (f *flagNode) Decommission(_ context.Context, _ string, dryRun bool) (DecommissionVerdict, error) {
	f.calls++
	f.dryRun = dryRun
	return DecommissionVerdict{}, nil
}

func (f *flagNode) Moves(_ context.Context, detail bool) messages.MoveList {
	f.calls++
	f.detail = detail
	return messages.MoveList{}
}

func (f *flagNode) Consume(_ context.Context, _ string, _ int, wait time.Duration) (messages.Delivery, bool, error) {
	f.calls++
	f.wait = wait
	return messages.Delivery{}, false, nil
}

// Issue 14 item 4: every boolean query parameter takes true/1/false/0,
// absent is false, and anything else is a 400 that reaches no node. The
// issue's case: dry_run=true decommissioned for real.
func TestIssue14BooleanQueryParametersTakeTheSameSpellingsEverywhere(t *testing.T) {
	params := []struct {
		name, method, path string
		read               func(*flagNode) bool
	}{
		{"dry_run", "POST", "/v1/cluster/members/n4/decommission", func(f *flagNode) bool { return f.dryRun }},
		{"detail", "GET", "/v1/cluster/moves", func(f *flagNode) bool { return f.detail }},
		{"local_only", "GET", "/v1/topics/t/consume?wait=5s", func(f *flagNode) bool { return f.wait == 0 }},
	}
	sep := func(path string) string {
		if strings.Contains(path, "?") {
			return "&"
		}
		return "?"
	}
	for _, p := range params {
		for query, want := range map[string]bool{"": false, p.name + "=true": true, p.name + "=1": true, p.name + "=false": false, p.name + "=0": false} {
			f := &flagNode{fakeNode: readyNode()}
			target := p.path
			if query != "" {
				target += sep(p.path) + query
			}
			code, body := serve(t, f, p.method, target, "")
			if code >= 400 || f.calls != 1 {
				t.Fatalf("%s %s: got %d %q after %d node calls, want it served once", p.method, target, code, body, f.calls)
			}
			if got := p.read(f); got != want {
				t.Errorf("%s %s: %s read as %v, want %v", p.method, target, p.name, got, want)
			}
		}
		for _, v := range []string{p.name + "=", p.name, p.name + "=yes", p.name + "=TRUE", p.name + "=True", p.name + "=2", p.name + "=on", p.name + "=1&" + p.name + "=1"} {
			f := &flagNode{fakeNode: readyNode()}
			target := p.path + sep(p.path) + v
			code, body := serve(t, f, p.method, target, "")
			if code != http.StatusBadRequest || f.calls != 0 {
				t.Errorf("%s %s: got %d %q after %d node calls, want 400 and no call", p.method, target, code, body, f.calls)
			}
		}
	}
}

// Issue 14 item 4: a dry run answers the verdict (200), never the 204 of a
// decommission begun.
func TestIssue14DryRunTrueIsADryRun(t *testing.T) {
	f := &flagNode{fakeNode: readyNode()}
	code, body := serve(t, f, "POST", "/v1/cluster/members/n4/decommission?dry_run=true", "")
	if code != http.StatusOK || !f.dryRun {
		t.Fatalf("dry_run=true: got %d %q (dry run passed: %v), want 200 with the verdict of a dry run", code, body, f.dryRun)
	}
	f = &flagNode{fakeNode: readyNode()}
	code, body = serve(t, f, "POST", "/v1/cluster/members/n4/decommission?dry_run=%zz", "")
	wantError(t, "dry_run badly escaped", code, body, http.StatusBadRequest, `invalid argument: invalid URL escape "%zz"`)
	if f.calls != 0 {
		t.Fatalf("dry_run badly escaped: reached the node %d times, want never", f.calls)
	}
}

// Issue 14 item 4: a key is UTF-8 once unescaped, or the produce is a 400
// that writes nothing.
func TestIssue14AProduceKeyThatIsNotUTF8Is400(t *testing.T) {
	for _, q := range []string{"key=%ff%fe", "key=ok%c3", "key=%ed%a0%80"} {
		f := readyNode()
		code, body := serve(t, f, "POST", "/v1/topics/t/produce?"+q, "x")
		wantError(t, q, code, body, http.StatusBadRequest, "invalid argument: key is not valid UTF-8")
		if f.got != nil {
			t.Fatalf("%s: reached the node with %+v, want nothing produced", q, f.got)
		}
	}
	f := readyNode()
	if code, body := serve(t, f, "POST", "/v1/topics/t/produce?key=%c3%bc", "x"); code != http.StatusAccepted || f.got.(Record).Key != "ü" {
		t.Fatalf("key ü: got %d %q, record %+v, want 202 with key ü", code, body, f.got)
	}
}
