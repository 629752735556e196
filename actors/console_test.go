package actors

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// BenchmarkConsolePages times the /v1 calls each of the console's views
// makes on one refresh (actors/api/console), against a node that owns
// 10,000 partitions (100 topics of 100): the issue asks each page to
// answer in under 100 ms there. Each sub-benchmark is one view's refresh,
// its calls one after the other as the page's Promise.all sends them at
// once, so the figure is an upper bound.
//
//	go test ./actors -run '^$' -bench ConsolePages -benchtime 20x
func BenchmarkConsolePages(b *testing.B) {
	const topics, perTopic = 100, 100
	tn := newTestNode(b, func(c *Config) { c.RequestTimeout = time.Minute })
	ctx := context.Background()
	for i := range topics {
		if _, err := tn.n.CreateTopic(ctx, messages.CreateTopicRequest{Name: fmt.Sprintf("t%d", i), Partitions: perTopic}); err != nil {
			b.Fatal(err)
		}
	}
	waitHWMs(b, tn.n, topics, perTopic, 0)
	for _, view := range []struct {
		name  string
		calls []string
	}{
		{"cluster", []string{"/v1/cluster/members", "/v1/cluster/moves", "/v1/cluster/leaders"}},
		{"moves", []string{"/v1/cluster/moves?summary=1", "/v1/cluster/members"}},
		{"topics", []string{"/v1/topics?limit=50&page_token=t5"}},
		{"topic", []string{"/v1/topics/t42"}},
		{"login", []string{"/v1/whoami"}},
	} {
		b.Run(view.name, func(b *testing.B) {
			for b.Loop() {
				for _, path := range view.calls {
					if code, body := tn.do("GET", path, nil); code != http.StatusOK {
						b.Fatalf("GET %s: got %d %s, want 200", path, code, body)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/refresh")
		})
	}
}

// A member's refusal reaches the API as the node's sentinel with the
// member's own words, so the console shows why; a status with no
// sentinel stays the error it was (500).
func TestAMembersRefusalKeepsItsKindAndItsWords(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   error
	}{{400, ErrInvalid}, {404, ErrNotFound}, {transport.StatusUnavailable, ErrUnavailable}, {transport.StatusTimeout, ErrUnavailable}} {
		err := fromRemote(transport.Errorf(tc.status, "words of n2"))
		if !errors.Is(err, tc.want) || err.Error() != "words of n2" {
			t.Errorf("status %d: got %v, want %v with the member's words", tc.status, err, tc.want)
		}
	}
	if err := fromRemote(transport.Errorf(transport.StatusInternal, "disk")); errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalid) {
		t.Errorf("status 500: got %v, want no sentinel", err)
	}
	if err := fromRemote(nil); err != nil {
		t.Errorf("no error: got %v, want nil", err)
	}
}
