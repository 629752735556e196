package testnet

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A Ports hands each port of its range out once, and only ports of it.
func TestPortsHandsEachPortOutOnce(t *testing.T) {
	r := Range{Base: 16000, Span: 50}
	p := r.Ports()
	seen := map[string]bool{}
	for range 40 {
		addr := p.Addr(t)
		_, ps, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(ps)
		if port < r.Base || port >= r.Base+r.Span {
			t.Fatalf("port %d: want one in %d..%d", port, r.Base, r.Base+r.Span-1)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
	}
}

// A block is consecutive ports of the range, none handed out before, and
// no port of it is handed out again.
func TestPortsBlocksAreConsecutiveAndHandedOutOnce(t *testing.T) {
	r := Range{Base: 16100, Span: 200}
	p := r.Ports()
	seen := map[int]bool{}
	for range 4 {
		first := p.Block(t, 8)
		if first < r.Base || first+8 > r.Base+r.Span {
			t.Fatalf("block %d..%d: want it within %d..%d", first, first+7, r.Base, r.Base+r.Span-1)
		}
		for port := first; port < first+8; port++ {
			if seen[port] {
				t.Fatalf("port %d handed out twice", port)
			}
			seen[port] = true
		}
	}
	for range 8 {
		_, ps, _ := net.SplitHostPort(p.Addr(t))
		if port, _ := strconv.Atoi(ps); seen[port] {
			t.Fatalf("Addr handed out %d of a block", port)
		}
	}
}

// The ranges of the packages never overlap, nor reach the kernel's
// ephemeral range; NaradDev's Raft ports (10000 above) included.
func TestRangesAreDisjointAndBelowTheEphemeralRange(t *testing.T) {
	rs := map[string]Range{"Actors": Actors, "Metastore": Metastore, "Narad": Narad, "Deploy": Deploy, "NaradDev": NaradDev,
		"NaradDev's Raft": {Base: NaradDev.Base + 10000, Span: NaradDev.Span}}
	for a, ra := range rs {
		if ra.Base < 1024 || ra.Base+ra.Span > 32768 {
			t.Errorf("%s %d..%d: want it within 1024..32767", a, ra.Base, ra.Base+ra.Span-1)
		}
		for b, rb := range rs {
			if a < b && ra.Base < rb.Base+rb.Span && rb.Base < ra.Base+ra.Span {
				t.Errorf("%s and %s overlap", a, b)
			}
		}
	}
}

func TestWaitReportsWhetherTheConditionHeld(t *testing.T) {
	n := 0
	if !Wait(time.Minute, func() bool { n++; return n == 3 }) {
		t.Fatalf("a condition that comes true: got false, want true")
	}
	if Wait(20*time.Millisecond, func() bool { return false }) {
		t.Fatalf("a condition that never holds: got true, want false")
	}
}

func TestStartNATSServesOnLoopback(t *testing.T) {
	s := StartNATS(t, nil)
	if got := s.Addr().(*net.TCPAddr); !got.IP.IsLoopback() {
		t.Fatalf("listening on %v, want loopback", got)
	}
}

func TestTailKeepsTheLastLinesOldestFirst(t *testing.T) {
	var tl tail
	for i := range LogLinesMax + 2 {
		fmt.Fprintf(&tl, "line %d\n", i)
	}
	lines := strings.Split(strings.TrimSuffix(tl.String(), "\n"), "\n")
	if len(lines) != LogLinesMax {
		t.Fatalf("kept %d lines, want %d", len(lines), LogLinesMax)
	}
	if first, last := lines[0], lines[len(lines)-1]; first != "line 2" || last != fmt.Sprintf("line %d", LogLinesMax+1) {
		t.Errorf("first and last kept: got %q, %q, want %q, %q", first, last, "line 2", fmt.Sprintf("line %d", LogLinesMax+1))
	}
}
