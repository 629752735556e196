package consume

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/hints"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// oneTopic is a replica with the topic t of 3 partitions.
type oneTopic struct{}

func (oneTopic) Topic(name string) (messages.Topic, bool) {
	if name != "t" {
		return messages.Topic{}, false
	}
	return messages.Topic{Name: "t", Partitions: 3, Incarnation: 1}, true
}

// answering is an owner that answers every ask with reply.
type answering struct{ reply any }

func (a answering) Ask(context.Context, messages.PartitionKey, any) (any, error) { return a.reply, nil }
func (a answering) Local(context.Context, messages.PartitionKey, any) (any, error) {
	return a.reply, nil
}
func (answering) Owner(messages.PartitionKey) (string, error) { return "n1", nil }
func (answering) ReserveAny(context.Context, string, messages.PartitionKey, *messages.ReserveAny) (*messages.Reserved, error) {
	return nil, errors.New("no peer")
}

func leasesAnswering(reply any) *Leases {
	return New(Deps{Config: Config{NodeID: "n1", MaxWait: time.Second, RotateEvery: 8, RescanInterval: time.Millisecond,
		FullScanInterval: time.Millisecond}, Store: oneTopic{}, Owners: answering{reply}})
}

// What a replay and a settle answer for each status their partition
// answers, in the node's sentinels.
func TestReplayAndSettleNameTheirOutcomes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		status messages.Status
		ok     bool
		want   error
	}{
		{messages.StatusOK, true, nil},
		{messages.StatusEmpty, false, nil},
		{messages.StatusGone, false, errs.ErrGone},
		{messages.StatusUnavailable, false, errs.ErrUnavailable},
	} {
		_, ok, err := leasesAnswering(&messages.Reserved{Status: c.status}).Replay(ctx, "t", 0, 5)
		if ok != c.ok || !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("replay answered %v: got ok %v, %v; want ok %v, %v", c.status, ok, err, c.ok, c.want)
		}
	}
	if _, _, err := leasesAnswering(nil).Replay(ctx, "t", 3, 0); !errors.Is(err, errs.ErrNoSuchPartition) {
		t.Errorf("replay of partition 3 of 3: got %v, want ErrNoSuchPartition", err)
	}
	for _, c := range []struct {
		status messages.Status
		want   error
	}{
		{messages.StatusOK, nil},
		{messages.StatusGone, errs.ErrGone},
		{messages.StatusFull, errs.ErrAckedAheadFull},
		{messages.StatusUnavailable, errs.ErrUnavailable},
	} {
		err := leasesAnswering(&messages.LeaseResult{Status: c.status}).Settle(ctx, "t", api.Handle{Partition: 1}, messages.LeaseAck)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("settle answered %v: got %v, want %v", c.status, err, c.want)
		}
	}
	if err := leasesAnswering(nil).Settle(ctx, "t", api.Handle{Partition: 3}, messages.LeaseAck); !errors.Is(err, errs.ErrGone) {
		t.Errorf("settle of partition 3 of 3: got %v, want ErrGone", err)
	}
	if err := leasesAnswering(nil).Settle(ctx, "nope", api.Handle{}, messages.LeaseAck); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("settle on an unknown topic: got %v, want ErrNotFound", err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{MaxWait: time.Second, MaxLongPolls: 1, RotateEvery: 8, RescanInterval: time.Millisecond, FullScanInterval: time.Second}
	if err := good.Validate(); err != nil {
		t.Fatalf("the defaults: got %v, want nil", err)
	}
	for name, bad := range map[string]func(*Config){
		"MaxConsumeWait":          func(c *Config) { c.MaxWait = 0 },
		"ConsumeRotateEvery":      func(c *Config) { c.RotateEvery = 1025 },
		"MaxConsumeLongPolls":     func(c *Config) { c.MaxLongPolls = 0 },
		"ConsumeRescanInterval":   func(c *Config) { c.RescanInterval = time.Microsecond },
		"ConsumeFullScanInterval": func(c *Config) { c.FullScanInterval = 2 * time.Minute },
	} {
		c := good
		bad(&c)
		if err := c.Validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s out of range: got %v, want ErrInvalid", name, err)
		}
	}
}

// TestALongPollPastTheCapIsAnsweredBusyAtOnce: with one long poll waiting
// and a cap of one, a second consume that finds nothing and would wait is
// answered ErrBusy at once (the API's 503 with Retry-After); a consume that
// does not wait is answered as before, and the slot comes back when the
// first poll ends.
func TestALongPollPastTheCapIsAnsweredBusyAtOnce(t *testing.T) {
	wall := clock.Or(nil)
	l := New(Deps{Config: Config{NodeID: "n1", MaxWait: time.Minute, MaxLongPolls: 1, RotateEvery: 8,
		RescanInterval: 50 * time.Millisecond, FullScanInterval: time.Second},
		Store: oneTopic{}, Owners: answering{&messages.Reserved{Status: messages.StatusEmpty}},
		Notifier: hints.NewNotifier(wall), Metrics: NewMetrics(metrics.NewSet(), "n1"), Clock: wall})
	waiting, stop := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, _, err := l.Consume(waiting, "t", -1, time.Minute)
		first <- err
	}()
	testnet.Eventually(t, liveness, "the first long poll waiting", func() bool { return l.deps.Metrics.LongPolls.Get() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	if _, ok, err := l.Consume(ctx, "t", -1, time.Minute); ok || !errors.Is(err, errs.ErrBusy) {
		t.Fatalf("a second long poll past the cap of 1: got ok %v, %v; want ErrBusy at once", ok, err)
	}
	if _, ok, err := l.Consume(ctx, "t", -1, 0); ok || err != nil {
		t.Fatalf("a consume that does not wait: got ok %v, %v; want nothing, nil", ok, err)
	}
	stop()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first long poll, its client gone: got %v, want %v", err, context.Canceled)
	}
	if got := l.deps.Metrics.LongPolls.Get(); got != 0 {
		t.Fatalf("long polls after the first ended: got %v, want 0", got)
	}
	if got := l.deps.Metrics.LongPollsRefused.Get(); got != 1 {
		t.Fatalf("long polls refused: got %d, want 1", got)
	}
	if _, ok, err := l.Consume(ctx, "t", -1, time.Millisecond); ok || err != nil {
		t.Fatalf("a long poll once the slot is free: got ok %v, %v; want nothing after its wait, nil", ok, err)
	}
}

// liveness bounds this package's waits: never reached on a healthy run.
const liveness = 10 * time.Second
