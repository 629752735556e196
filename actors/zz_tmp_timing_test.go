package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
)

func TestClusterZZTiming(t *testing.T) {
	c := newTestCluster(t, 3)
	watch := func(d time.Duration) {
		last := ""
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			s := fmt.Sprint(c.memberStatuses(0))
			if s != last {
				t.Logf("%s %s", time.Now().Format("05.000"), s)
				last = s
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	probe := func(label string) {
		st := c.node(0).n.Store()
		var worst time.Duration
		fails := 0
		for range 20 {
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := st.Heartbeat(ctx, "n1")
			cancel()
			if err != nil {
				fails++
			}
			worst = max(worst, time.Since(t0))
		}
		l, _ := st.Leader(metastore.MetaShard)
		t.Logf("%s: heartbeat worst %v fails %d leader %d", label, worst, fails, l)
	}
	t.Logf("leader n%d", c.leader()+1)
	probe("before kill")
	c.kill(2)
	probe("after kill")
	watch(2 * time.Second)
	probe("2s after kill")
}
