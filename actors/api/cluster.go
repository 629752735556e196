package api

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/naradmq/narad/messages"
)

func (h *handlers) members(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, messages.MemberList{Members: h.node.Members(r.Context())})
}

// moves lists the moves; summary=1 (beyond the contract) adds the line
// `narad cluster moves --watch` prints, which the console shows.
func (h *handlers) moves(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	detail, bad := queryFlag(q, "detail")
	if bad != nil {
		writeError(w, bad.status, bad.text)
		return
	}
	summary, bad := queryFlag(q, "summary")
	if bad != nil {
		writeError(w, bad.status, bad.text)
		return
	}
	if summary {
		writeJSON(w, http.StatusOK, h.node.MovesWithSummary(r.Context(), detail))
		return
	}
	writeJSON(w, http.StatusOK, h.node.Moves(r.Context(), detail))
}

// leaders names who leads each Raft shard (beyond the contract).
func (h *handlers) leaders(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.node.Leaders())
}

// abortStatus is the status of each abort result (rules T3, T4).
var abortStatus = map[AbortResult]int{
	Aborted:       http.StatusAccepted,
	AbortNoMove:   http.StatusConflict,
	AbortRefused:  http.StatusConflict,
	AbortNotFound: http.StatusNotFound,
	AbortUnknown:  http.StatusServiceUnavailable,
}

// AbortStatus is the HTTP status of an abort's result, which the NATS
// admin verb answers too; 500 for a result it does not know.
func AbortStatus(r AbortResult) int {
	if s, ok := abortStatus[r]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// abortMove answers with the outcome whatever it is: a refusal names the
// owner and target the leader has now.
func (h *handlers) abortMove(w http.ResponseWriter, r *http.Request) {
	p, err := strconv.Atoi(r.PathValue("partition"))
	if err != nil || p < 0 {
		writeError(w, http.StatusBadRequest, textBadPartition)
		return
	}
	topic := r.PathValue("topic")
	o := h.node.AbortMove(r.Context(), topic, p, r.URL.Query().Get("target"))
	writeJSON(w, AbortStatus(o.Result), messages.AbortMoveReply{Topic: topic, Partition: p, Owner: o.Owner, Target: o.Target,
		Result: string(o.Result), Error: o.Reason})
}

// decommission answers 204 once draining started, 200 with the verdict
// for a dry run, and 409 for a decommission that could never complete
// (rule D8). The query is parsed strictly: a dry_run lost to bad escaping
// would decommission for real.
func (h *handlers) decommission(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
		return
	}
	dryRun, bad := queryFlag(q, "dry_run")
	if bad != nil {
		writeError(w, bad.status, bad.text)
		return
	}
	v, err := h.node.Decommission(r.Context(), id, dryRun)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "member not found")
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, textControlPlane)
	case dryRun:
		writeJSON(w, http.StatusOK, v.Reply(id, dryRun))
	case v.Refusal != "":
		writeError(w, http.StatusConflict, v.Refusal)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// forget answers 200 with the verdict for a member forgotten or judged
// (dry_run), 400 without accept_data_loss, 404 for an unknown member and
// 409 for one that may not be forgotten (alive, the cluster version
// below 4, nobody to take its partitions). Beyond the contract.
func (h *handlers) forget(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
		return
	}
	dryRun, bad := queryFlag(q, "dry_run")
	accept, badAccept := queryFlag(q, "accept_data_loss")
	if bad = cmp.Or(bad, badAccept); bad != nil {
		writeError(w, bad.status, bad.text)
		return
	}
	v, err := h.node.Forget(r.Context(), id, dryRun, accept)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "member not found")
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, "forgetting member "+id+" loses every record only it held: add accept_data_loss=true to go on, or dry_run=true to see what it would do")
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, textControlPlane)
	case v.Refusal != "" && !dryRun:
		writeError(w, http.StatusConflict, "forget cannot go on: "+v.Refusal)
	default:
		writeJSON(w, http.StatusOK, v.Reply(id, dryRun))
	}
}

// cancelDecommission clears the drain flag; the planner may then give the
// node partitions again.
func (h *handlers) cancelDecommission(w http.ResponseWriter, r *http.Request) {
	if err := h.node.CancelDecommission(r.Context(), r.PathValue("id")); err != nil {
		writeFailure(w, err, cancelDecommissionAnswers, http.StatusInternalServerError, "cancel decommission failed")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// cancelDecommissionAnswers are the answers to a cancel that failed.
var cancelDecommissionAnswers = []answer{
	{ErrNotFound, http.StatusNotFound, "member not found"},
	{ErrInvalid, http.StatusBadRequest, ""},
	{ErrUnavailable, http.StatusServiceUnavailable, textControlPlane},
}

// clusterVersion lists the cluster version (beyond the contract).
func (h *handlers) clusterVersion(w http.ResponseWriter, r *http.Request) {
	v, err := h.node.ClusterVersion(r.Context())
	if err != nil {
		writeFailure(w, err, clusterVersionAnswers, http.StatusServiceUnavailable, textControlPlane)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// finalizeClusterVersion moves the cluster version up: 200 with the
// listing after, 409 with the reason while a member does not read it.
func (h *handlers) finalizeClusterVersion(w http.ResponseWriter, r *http.Request) {
	var req messages.FinalizeClusterVersion
	if !readJSON(w, r, &req) {
		return
	}
	v, err := h.node.FinalizeClusterVersion(r.Context(), req.Version)
	if err != nil {
		writeFailure(w, err, clusterVersionAnswers, http.StatusServiceUnavailable, textControlPlane)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// clusterVersionAnswers are the answers to a version listing or finalize
// that failed.
var clusterVersionAnswers = []answer{
	{ErrInvalid, http.StatusBadRequest, ""},
	{ErrConflict, http.StatusConflict, ""},
	{ErrUnavailable, http.StatusServiceUnavailable, textControlPlane},
}

// setAside lists the copies the members set aside (beyond the contract;
// `narad cluster quarantine` over HTTP): any user may read it, as the
// members listing's figures.
func (h *handlers) setAside(w http.ResponseWriter, r *http.Request) {
	l, err := h.node.SetAside(r.Context(), r.URL.Query().Get("node"))
	if err != nil {
		writeFailure(w, err, setAsideAnswers, http.StatusInternalServerError, "quarantine listing failed")
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// releaseSetAside removes one copy set aside, or says what it would
// remove (dry_run): `narad cluster quarantine release` over HTTP, admin.
func (h *handlers) releaseSetAside(w http.ResponseWriter, r *http.Request) {
	var req messages.QuarantineReleaseRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Node == "" || req.Path == "" {
		writeError(w, http.StatusBadRequest, "invalid argument: a release needs node and path")
		return
	}
	out, err := h.node.ReleaseSetAside(r.Context(), req)
	if err != nil {
		writeFailure(w, err, setAsideAnswers, http.StatusInternalServerError, "quarantine release failed")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// setAsideAnswers are the answers to a quarantine listing or release that
// failed; each carries the member's reason.
var setAsideAnswers = []answer{
	{ErrInvalid, http.StatusBadRequest, ""},
	{ErrNotFound, http.StatusNotFound, "not found"},
	{ErrUnavailable, http.StatusServiceUnavailable, textControlPlane},
}
