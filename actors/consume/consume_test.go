package consume

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/errs"
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
	good := Config{MaxWait: time.Second, RotateEvery: 8, RescanInterval: time.Millisecond, FullScanInterval: time.Second}
	if err := good.Validate(); err != nil {
		t.Fatalf("the defaults: got %v, want nil", err)
	}
	for name, bad := range map[string]func(*Config){
		"MaxConsumeWait":          func(c *Config) { c.MaxWait = 0 },
		"ConsumeRotateEvery":      func(c *Config) { c.RotateEvery = 1025 },
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
