package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/naradmq/narad/bench/proc"
)

// profile starts a CPU profile of each node in nodes, over -profile-for,
// written to -profile/<scenario>-<node>.cpu.pprof, and returns a function
// that waits for them. Without -profile it does nothing. A profile that
// fails is logged, not fatal: it is evidence about the figures, not one of
// them.
func (r *runner) profile(ctx context.Context, scenario string, nodes []*proc.Node) (wait func()) {
	if r.cfg.profileDir == "" {
		return func() {}
	}
	if err := os.MkdirAll(r.cfg.profileDir, 0o755); err != nil {
		r.logf("%s: profile: %v", scenario, err)
		return func() {}
	}
	secs := int(r.cfg.profileFor / time.Second)
	// The endpoint answers once the profile has run; allow it a margin.
	hc := &http.Client{Timeout: r.cfg.profileFor + 30*time.Second}
	var wg sync.WaitGroup
	for _, n := range nodes {
		path := filepath.Join(r.cfg.profileDir, fmt.Sprintf("%s-%s.cpu.pprof", scenario, n.ID))
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", n.Pprof, secs)
		wg.Go(func() {
			if err := fetchProfile(ctx, hc, url, path); err != nil {
				r.logf("%s: profile of %s: %v", scenario, n.ID, err)
				return
			}
			r.logf("%s: CPU profile of %s over %ds in %s", scenario, n.ID, secs, path)
		})
	}
	return wg.Wait
}

func fetchProfile(ctx context.Context, hc *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
