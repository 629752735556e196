// Package transport is the node-to-node transport of a Narad cluster:
// request/reply over NATS on per-node subjects, plus admin verbs any node
// answers.
//
// Start with transport.go: Connect opens a Transport for one node; Handle
// serves one of the node's services on narad.<cluster>.node.<id>.<service>;
// Request calls a service of any node (itself included); HandleAdmin serves
// narad.<cluster>.admin.<verb> in the queue group "admin", so exactly one
// node answers each admin request. json.go adapts both sides to JSON bodies.
// errors.go says what each error means for the request's outcome, which is
// what callers must decide on:
//
//   - ErrNoResponders, ErrNotConnected, a local ErrTooLarge and a
//     StatusUnavailable *RemoteError: not processed, safe to send again or
//     elsewhere (NotProcessed);
//   - ErrTimeout: outcome unknown; Request never retries it;
//   - *RemoteError (ErrRemote): the handler ran and answered an error with a
//     status (404, 409, 421, ...).
//
// The caller's remaining budget travels in a header, so the handler's
// context ends when the caller stops waiting. subjects.go builds and checks
// subjects, config.go holds the knobs, metrics.go the narad_nats_* series.
// Transport.CutOff is a fault-injection seam for cluster tests.
package transport
