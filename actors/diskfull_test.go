package actors

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A node whose disk is full says so (issue 15): a produce answers 503
// naming the cause instead of "produce failed", /readyz answers 503 with
// it, narad_disk_full reads 1; once the space is back the write probe
// finds it, and the node serves and reads ready again, with no produce
// needed to tell it.
func TestANodeWithAFullDiskSaysSoUntilAWriteSucceeds(t *testing.T) {
	var full atomic.Bool
	tn := newTestNode(t, func(c *Config) { c.faults = &faultHooks{noSpace: full.Load} })
	tn.createTopic("d", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/d/produce", []byte(`"before"`))

	full.Store(true)
	code, body := tn.do("POST", "/v1/topics/d/produce", []byte(`"while full"`))
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "no space left") {
		t.Fatalf("a produce on a full disk: got %d %s, want 503 naming the lack of space", code, body)
	}
	code, body = tn.do("GET", "/readyz", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "no space left") {
		t.Fatalf("/readyz on a full disk: got %d %s, want 503 naming the lack of space", code, body)
	}
	if got := tn.n.writes.Full(); !got {
		t.Fatal("narad_disk_full's verdict: got not full, want full")
	}

	full.Store(false) // space freed; no produce arrives to show it
	deadline := time.Now().Add(30 * time.Second)
	for code, _ = tn.do("GET", "/readyz", nil); code != http.StatusOK; code, _ = tn.do("GET", "/readyz", nil) {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once the space is back: got %d, want 200 (the probe should find it)", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tn.must(http.StatusAccepted, "POST", "/v1/topics/d/produce", []byte(`"after"`))
}
