// Package testnet is what the tests of several packages share to run a
// cluster on one machine: loopback ports that no other package's tests
// pick at the same time (Ports, with one range per package in ranges.go),
// the one polling wait (Eventually, Wait), an embedded NATS server
// (StartNATS) and the nodes' logger, which prints their last warnings when
// a test fails (Logger). It is imported by tests only; nothing in it runs in a
// node. Start with ranges.go: a package that picks ports takes its range
// there.
package testnet
