package freeze

import (
	"slices"
	"testing"
	"time"
)

var p0 = time.Unix(1_000_000, 0)

func paceCfg() PaceConfig {
	return PaceConfig{Tick: time.Millisecond, PerTick: 4, MaxFrozen: 128, FreezeTTL: 30 * time.Second,
		KeepTurnFor: 3 * time.Second, MaxLine: 1024}
}

// rule B5: at most PerTick new freezes in one tick; the rest wait parked
// and are granted in line order on the next ticks.
func TestPacerArmsAtMostPerTickRuleB5(t *testing.T) {
	p := NewPacer[int](paceCfg())
	var granted []int
	for k := range 10 {
		if ok, wake := p.Ask(p0, k); ok {
			granted = append(granted, k)
		} else if len(wake) > 0 {
			t.Fatalf("ask %d woke %v in a full tick", k, wake)
		}
	}
	if want := []int{0, 1, 2, 3}; !slices.Equal(granted, want) {
		t.Fatalf("granted in the first tick: got %v, want %v", granted, want)
	}
	if frozen, held := p.Counts(p0); frozen != 4 || held != 6 {
		t.Fatalf("counts: got frozen %d held %d, want 4 and 6", frozen, held)
	}
	if got := p.Pump(p0.Add(500 * time.Microsecond)); len(got) != 0 {
		t.Fatalf("pump in the same tick: got %v, want none", got)
	}
	if got, want := p.Pump(p0.Add(time.Millisecond)), []int{4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Fatalf("pump on the next tick: got %v, want %v", got, want)
	}
	if got, want := p.Pump(p0.Add(2*time.Millisecond)), []int{8, 9}; !slices.Equal(got, want) {
		t.Fatalf("pump on the tick after: got %v, want %v", got, want)
	}
	if p.Waiting() {
		t.Fatal("Waiting after every prepare was granted")
	}
}

// rule B5: none while MaxFrozen partitions are frozen; a thaw (or a lapse)
// frees room for the head of the line.
func TestPacerArmsNoneWhileMaxFrozenRuleB5(t *testing.T) {
	c := paceCfg()
	c.MaxFrozen = 4
	p := NewPacer[int](c)
	for k := range 4 {
		if ok, _ := p.Ask(p0.Add(time.Duration(k)*time.Millisecond), k); !ok {
			t.Fatalf("ask %d under the cap: held", k)
		}
	}
	now := p0.Add(10 * time.Millisecond)
	if ok, _ := p.Ask(now, 10); ok {
		t.Fatal("granted a fifth freeze with 4 frozen and a cap of 4")
	}
	if got := p.Pump(now.Add(time.Millisecond)); len(got) != 0 {
		t.Fatalf("pump at the cap: got %v, want none", got)
	}
	p.Thaw(2)
	if got, want := p.Pump(now.Add(2*time.Millisecond)), []int{10}; !slices.Equal(got, want) {
		t.Fatalf("pump after a thaw: got %v, want %v", got, want)
	}
	// A freeze whose partition re-armed counts until its own lapse.
	p.Frozen(0, now.Add(time.Second))
	if ok, _ := p.Ask(now.Add(3*time.Millisecond), 11); ok {
		t.Fatal("granted at the cap")
	}
	if got := p.Pump(now.Add(999 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("pump before partition 0's freeze lapses: got %v", got)
	}
	if got, want := p.Pump(now.Add(time.Second)), []int{11}; !slices.Equal(got, want) {
		t.Fatalf("pump once partition 0's freeze lapsed: got %v, want %v", got, want)
	}
}

// rule B5: a held move keeps its turn: answered "held" and asking again
// later, it is served before the moves that asked after it, within
// KeepTurnFor.
func TestPacerHeldMoveKeepsItsTurnRuleB5(t *testing.T) {
	c := paceCfg()
	c.PerTick, c.MaxFrozen = 1, 1
	p := NewPacer[int](c)
	if ok, _ := p.Ask(p0, 0); !ok {
		t.Fatal("first ask held")
	}
	p.Ask(p0, 1) // held, parked
	p.Unpark(p0.Add(2*time.Second), 1)
	p.Ask(p0.Add(2*time.Second), 2) // parked behind 1, which is away
	p.Thaw(0)
	// 1 is away: 2 may take the room; 1 keeps its place ahead of 3.
	if got, want := p.Pump(p0.Add(2*time.Second+time.Millisecond)), []int{2}; !slices.Equal(got, want) {
		t.Fatalf("pump with 1 away: got %v, want %v", got, want)
	}
	p.Ask(p0.Add(2*time.Second+2*time.Millisecond), 3)
	p.Thaw(2)
	if ok, wake := p.Ask(p0.Add(3*time.Second), 1); !ok || len(wake) != 0 {
		t.Fatalf("1 asking again: got granted %v wake %v, want granted ahead of 3", ok, wake)
	}
	// A place not taken up again within KeepTurnFor is lost.
	p.Unpark(p0.Add(3*time.Second), 3)
	p.Thaw(1)
	if _, held := p.Counts(p0.Add(6 * time.Second)); held != 0 {
		t.Fatalf("held after KeepTurnFor: got %d, want 0", held)
	}
}

func TestPacerGrantsAFrozenPartitionAgainAndBoundsTheLine(t *testing.T) {
	c := paceCfg()
	c.PerTick, c.MaxFrozen, c.MaxLine = 1, 1, 2
	p := NewPacer[int](c)
	p.Ask(p0, 0)
	if ok, _ := p.Ask(p0, 0); !ok {
		t.Fatal("a second prepare of a frozen partition: held, want granted (it freezes nothing more)")
	}
	p.Ask(p0, 1)
	p.Ask(p0, 2)
	p.Ask(p0, 3) // beyond MaxLine: no place
	if _, held := p.Counts(p0); held != 2 {
		t.Fatalf("held: got %d, want MaxLine 2", held)
	}
	p.Thaw(0)
	if got, want := p.Pump(p0.Add(time.Millisecond)), []int{1}; !slices.Equal(got, want) {
		t.Fatalf("pump: got %v, want %v", got, want)
	}
}

func TestPaceConfigValidate(t *testing.T) {
	if err := paceCfg().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, mut := range []func(*PaceConfig){
		func(c *PaceConfig) { c.Tick = 0 },
		func(c *PaceConfig) { c.PerTick = 0 },
		func(c *PaceConfig) { c.MaxFrozen = c.PerTick - 1 },
		func(c *PaceConfig) { c.FreezeTTL = 0 },
		func(c *PaceConfig) { c.KeepTurnFor = 0 },
		func(c *PaceConfig) { c.MaxLine = 0 },
	} {
		c := paceCfg()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%+v: valid, want an error", c)
		}
	}
}

// The node pumps every tick while prepares wait: a line of 512 (every move
// in flight asking one source) is what that costs.
func BenchmarkPacerPump512Waiting(b *testing.B) {
	c := paceCfg()
	p := NewPacer[int](c)
	for k := range 128 {
		p.Frozen(k, p0.Add(time.Hour))
	}
	for k := range 512 {
		p.Ask(p0, 1000+k)
	}
	now := p0
	b.ResetTimer()
	for range b.N {
		now = now.Add(time.Millisecond)
		p.Pump(now)
	}
}

// The smallest valid limits are valid: one freeze a tick, as many frozen
// as armed per tick, a line of one.
func TestPaceConfigAcceptsItsSmallestLimits(t *testing.T) {
	c := paceCfg()
	c.PerTick, c.MaxFrozen, c.MaxLine = 1, 1, 1
	if err := c.Validate(); err != nil {
		t.Fatalf("%+v: %v, want valid", c, err)
	}
	c.PerTick, c.MaxFrozen = 4, 4
	if err := c.Validate(); err != nil {
		t.Fatalf("%+v: %v, want valid (max frozen equal to per tick)", c, err)
	}
}

// A partition that closes while it waits gives up its place: the next in
// line is served, never the one that left.
func TestPacerThawOfAWaitingPartitionGivesUpItsPlace(t *testing.T) {
	c := paceCfg()
	c.PerTick, c.MaxFrozen = 1, 1
	p := NewPacer[int](c)
	p.Ask(p0, 0)
	p.Ask(p0, 1) // head of the line
	p.Ask(p0, 2)
	p.Thaw(1)
	if _, held := p.Counts(p0); held != 1 {
		t.Fatalf("held after the head left: got %d, want 1", held)
	}
	p.Thaw(0)
	if got, want := p.Pump(p0.Add(time.Millisecond)), []int{2}; !slices.Equal(got, want) {
		t.Fatalf("pump: got %v, want %v", got, want)
	}
}

// expire skips its walk until the first lapse it knows of: whatever order
// freezes and places were recorded in, each lapses on time, and a freeze
// that lapsed makes room for a parked prepare.
func TestPacerForgetsEachLapseOnTimeWhateverTheOrder(t *testing.T) {
	for _, name := range []string{"late first", "early first"} {
		t.Run(name, func(t *testing.T) {
			cfg := paceCfg()
			cfg.MaxFrozen = 4
			p := NewPacer[int](cfg)
			if name == "late first" {
				p.Frozen(1, p0.Add(time.Minute))
				p.Frozen(2, p0.Add(10*time.Millisecond))
			} else {
				p.Frozen(2, p0.Add(10*time.Millisecond))
				p.Frozen(1, p0.Add(time.Minute))
			}
			p.Frozen(3, p0.Add(time.Minute))
			p.Frozen(4, p0.Add(time.Minute))
			if ok, _ := p.Ask(p0, 9); ok {
				t.Fatal("ask with 4 of 4 frozen: got granted, want parked")
			}
			if frozen, held := p.Counts(p0.Add(5 * time.Millisecond)); frozen != 4 || held != 1 {
				t.Fatalf("before the lapse: got frozen %d held %d, want 4 and 1", frozen, held)
			}
			if got := p.Pump(p0.Add(10 * time.Millisecond)); !slices.Equal(got, []int{9}) {
				t.Fatalf("pump at the lapse of 2: got %v, want [9]", got)
			}
			p.Thaw(9)
			if frozen, held := p.Counts(p0.Add(11 * time.Millisecond)); frozen != 3 || held != 0 {
				t.Fatalf("after the thaw: got frozen %d held %d, want 3 and 0", frozen, held)
			}
			// A place kept after an unpark lapses KeepTurnFor after it.
			p.Frozen(5, p0.Add(time.Minute))
			p.Ask(p0.Add(20*time.Millisecond), 7)
			p.Unpark(p0.Add(30*time.Millisecond), 7)
			if _, held := p.Counts(p0.Add(30*time.Millisecond + cfg.KeepTurnFor - time.Millisecond)); held != 1 {
				t.Fatalf("a kept place before KeepTurnFor: got %d held, want 1", held)
			}
			if _, held := p.Counts(p0.Add(30*time.Millisecond + cfg.KeepTurnFor)); held != 0 {
				t.Fatalf("a kept place at KeepTurnFor: got %d held, want 0", held)
			}
		})
	}
}
