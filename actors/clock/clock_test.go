package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/cluster/testnet"
)

// A stopped AfterFunc never runs, and Stop says whether it stopped one.
func TestAfterFuncStops(t *testing.T) {
	c := testnet.NewClock()
	ran := 0
	tm := c.AfterFunc(time.Second, func() { ran++ })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer said it stopped nothing")
	}
	if tm.Stop() {
		t.Fatal("a second Stop said it stopped the timer again")
	}
	c.Advance(time.Hour)
	if ran != 0 || c.Pending() != 0 {
		t.Fatalf("ran %d times, %d pending after Stop", ran, c.Pending())
	}
	fired := c.AfterFunc(time.Second, func() { ran++ })
	c.Advance(time.Second)
	if ran != 1 || fired.Stop() {
		t.Fatalf("ran %d times; Stop after the timer ran must say false", ran)
	}
}

// An Alarm receives the clock's time once; stopped first, never.
func TestAlarm(t *testing.T) {
	c := testnet.NewClock()
	a := clock.NewAlarm(c, time.Minute)
	c.Advance(time.Minute)
	select {
	case at := <-a.C:
		if !at.Equal(c.Now()) {
			t.Fatalf("alarm at %v, clock at %v", at, c.Now())
		}
	default:
		t.Fatal("alarm did not ring when its time came")
	}
	b := clock.NewAlarm(c, time.Minute)
	if !b.Stop() {
		t.Fatal("Stop of a pending alarm said it stopped nothing")
	}
	c.Advance(time.Hour)
	select {
	case <-b.C:
		t.Fatal("a stopped alarm rang")
	default:
	}
}

// A reset Alarm rings d after the reset, not after its first time, and a
// reset after it rang rings again; on the fake clock and the wall's.
func TestAlarmReset(t *testing.T) {
	c := testnet.NewClock()
	a := clock.NewAlarm(c, time.Minute)
	c.Advance(30 * time.Second)
	if !a.Reset(time.Minute) {
		t.Fatal("Reset of a pending alarm said it was not pending")
	}
	c.Advance(45 * time.Second)
	select {
	case <-a.C:
		t.Fatal("the alarm rang at its first time after a reset")
	default:
	}
	c.Advance(15 * time.Second)
	select {
	case <-a.C:
	default:
		t.Fatal("a reset alarm did not ring d after its reset")
	}
	if a.Reset(time.Second) {
		t.Fatal("Reset after the alarm rang said it was pending")
	}
	c.Advance(time.Second)
	select {
	case <-a.C:
	default:
		t.Fatal("a reset alarm did not ring again")
	}
	w := clock.NewAlarm(clock.Wall{}, time.Hour)
	if !w.Reset(time.Millisecond) {
		t.Fatal("Reset of a pending wall-clock alarm said it was not pending")
	}
	<-w.C
}

// A Ticker ticks every period the clock moves, drops a tick its reader
// has not taken, and after Stop leaves no timer behind.
func TestTicker(t *testing.T) {
	c := testnet.NewClock()
	tk := clock.NewTicker(c, time.Second)
	for range 3 {
		c.Advance(time.Second)
		select {
		case <-tk.C:
		default:
			t.Fatal("no tick after a whole period")
		}
	}
	c.Advance(time.Second)
	c.Advance(time.Second) // not read: dropped, not queued
	<-tk.C
	select {
	case <-tk.C:
		t.Fatal("a tick the reader missed was queued")
	default:
	}
	tk.Stop()
	c.Advance(time.Hour)
	select {
	case <-tk.C:
		t.Fatal("a stopped ticker ticked")
	default:
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers pending after Stop", c.Pending())
	}
}

// Sleep returns once the clock has moved by d, or with ctx's error when
// ctx ends first; it leaves no timer behind either way.
func TestSleep(t *testing.T) {
	c := testnet.NewClock()
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), c, time.Minute) }()
	testnet.Eventually(t, 10*time.Second, "the sleeper's timer", func() bool { return c.Pending() == 1 })
	c.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clock.Sleep(ctx, c, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep with an ended context: %v, want context.Canceled", err)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers pending after the sleeps", c.Pending())
	}
}

// Left is the time to a context's deadline, and nothing without one.
func TestLeft(t *testing.T) {
	if _, ok := clock.Left(context.Background()); ok {
		t.Fatal("a context without a deadline has time left")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if left, ok := clock.Left(ctx); !ok || left <= 0 || left > time.Hour {
		t.Fatalf("left %v (%v) of an hour", left, ok)
	}
}

// Or is the wall clock for a nil one.
func TestOr(t *testing.T) {
	if _, ok := clock.Or(nil).(clock.Wall); !ok {
		t.Fatal("Or(nil) is not Wall")
	}
	c := testnet.NewClock()
	if clock.Or(c) != clock.Clock(c) {
		t.Fatal("Or(c) is not c")
	}
}
