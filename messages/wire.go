package messages

// The envelope of node-to-node requests on NATS (cluster/transport). A
// request is a NATS request whose body is the service's own message; these
// headers travel beside it. A reply without HeaderStatus is a success and its
// body is the service's answer; a reply with HeaderStatus is an error and its
// body is an ErrorReply, JSON so that the stock `nats req` shows it.
const (
	// HeaderFrom is the id of the calling node ("" for a NATS CLI caller).
	HeaderFrom = "Narad-From"
	// HeaderTimeoutMs is the caller's remaining budget in whole milliseconds
	// when it sent the request. A relative budget, not a wall-clock deadline,
	// so clock skew between machines cannot shorten or stretch it; the
	// handler's context ends that long after the request arrives.
	HeaderTimeoutMs = "Narad-Timeout-Ms"
	// HeaderStatus is set on error replies only: an HTTP-like status code
	// (400 bad request, 404, 409, 413 too large, 421 not the owner, 500 the
	// handler failed, 503 refused before doing anything).
	HeaderStatus = "Narad-Status"
)

// ErrorReply is the body of an error reply.
type ErrorReply struct {
	Status int    `json:"status"`
	Error  string `json:"error"`
}
