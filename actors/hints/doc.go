// Package hints is what a node believes about where records wait, so a
// consume asks an owner that has one first: the commit notices a node
// sends its peers and reads from them (Notifier, which also wakes the
// node's long polls), and the ready book those notices and every reserve
// answer feed (Book, Plan). Everything here is a hint: a belief that is
// wrong costs a consumer latency, never a record, because the long poll
// still asks every partition in turn (Book.FullScanDue).
//
// Start with Notifier in notify.go; the node (package actors) makes one,
// hands its Notify to the partition actors, and its consume path
// (actors/consume) reads its Book.
package hints
