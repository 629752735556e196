package actors

import "github.com/naradmq/narad/cluster/testnet"

// fakeClock is a node's clock that moves only when a test advances it
// (cluster/testnet.Clock).
type fakeClock = testnet.Clock

func newFakeClock() *fakeClock { return testnet.NewClock() }
