package api

import (
	"net/http"
	"strconv"

	"github.com/naradmq/narad/messages"
)

// The contract's page sizes of GET /v1/topics.
const (
	defaultTopicListLimit = 100
	maxTopicListLimit     = 1000
)

// topicAnswers are the answers to a failed topic operation.
var topicAnswers = []answer{
	{ErrParentNotFound, http.StatusNotFound, "parent topic not found"},
	// A fan-out conflict is a Refusal: writeFailure answers its reason.
	{ErrConflict, http.StatusConflict, "topic already exists"},
	{ErrNotFound, http.StatusNotFound, textTopicNotFound},
	{ErrInvalid, http.StatusBadRequest, ""},
	{ErrUnavailable, http.StatusServiceUnavailable, textControlPlane},
}

// topicFailed answers a failed topic operation as the contract's §13
// catalogue says; op names it in the 500 text.
func topicFailed(w http.ResponseWriter, err error, op string) {
	writeFailure(w, err, topicAnswers, http.StatusInternalServerError, op+" failed")
}

// statsAnswers are the answers to partition stats that failed.
var statsAnswers = []answer{
	{ErrNotFound, http.StatusNotFound, textTopicNotFound},
	{ErrNoSuchPartition, http.StatusBadRequest, textBadPartition},
}

func (h *handlers) createTopic(w http.ResponseWriter, r *http.Request) {
	var req messages.CreateTopicRequest
	if !readJSON(w, r, &req) {
		return
	}
	caller := principal(r)
	if !Allowed(caller, ActionCreate, req.Name) {
		writeError(w, http.StatusForbidden, ActionCreate+" not allowed on this topic")
		return
	}
	if req.Parent != "" && !h.mayModify(caller, req.Parent) {
		writeError(w, http.StatusForbidden, textOwnerRequired)
		return
	}
	req.Owner = caller.Username // the client's owner is discarded
	t, err := h.node.CreateTopic(r.Context(), req)
	if err != nil {
		topicFailed(w, err, "create topic")
		return
	}
	if t.Role == "standalone" {
		t.Role = "" // Narad's create answer leaves a plain topic's role out
	}
	writeJSON(w, http.StatusCreated, t)
}

func (h *handlers) listTopics(w http.ResponseWriter, r *http.Request) {
	limit := defaultTopicListLimit
	if v, ok := r.URL.Query()["limit"]; ok {
		l, err := strconv.Atoi(v[0])
		if err != nil || l < 1 {
			writeError(w, http.StatusBadRequest, "limit must be a positive integer")
			return
		}
		limit = min(l, maxTopicListLimit)
	}
	page, more := h.node.TopicsAfter(r.URL.Query().Get("page_token"), limit)
	if page == nil {
		page = []messages.TopicInfo{}
	}
	next := ""
	if more && len(page) > 0 {
		next = page[len(page)-1].Name
	}
	writeJSON(w, http.StatusOK, messages.TopicPage{Topics: page, NextPageToken: next})
}

// getTopic looks the topic up before it reads ?partition=, so a missing
// topic is 404 whatever the query says.
func (h *handlers) getTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	t, err := h.node.Topic(name)
	if err != nil {
		topicFailed(w, err, "describe topic")
		return
	}
	only := -1
	if v, ok := r.URL.Query()["partition"]; ok {
		p, err := strconv.Atoi(v[0])
		if err != nil || p < 0 || p >= t.Partitions {
			writeError(w, http.StatusBadRequest, textBadPartition)
			return
		}
		only = p
	}
	stats, err := h.node.PartitionStats(r.Context(), name, only)
	if err != nil {
		// An owner that cannot be reached fails the request, as the
		// contract says.
		writeFailure(w, err, statsAnswers, http.StatusInternalServerError, "partition stats failed")
		return
	}
	if stats == nil {
		stats = []messages.PartitionInfo{}
	}
	writeJSON(w, http.StatusOK, messages.TopicDetails{TopicInfo: t, PartitionStats: stats})
}

func (h *handlers) alterTopic(w http.ResponseWriter, r *http.Request) {
	var req messages.AlterTopicRequest
	if !readJSON(w, r, &req) {
		return
	}
	t, err := h.node.AlterTopic(r.Context(), r.PathValue("topic"), req)
	if err != nil {
		topicFailed(w, err, "alter topic")
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (h *handlers) deleteTopic(w http.ResponseWriter, r *http.Request) {
	if err := h.node.DeleteTopic(r.Context(), r.PathValue("topic")); err != nil {
		topicFailed(w, err, "delete topic")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// attachChild answers a body past 1 MiB 400, as Narad's attach does.
func (h *handlers) attachChild(w http.ResponseWriter, r *http.Request) {
	var req messages.AttachChildRequest
	if !readJSONOr(w, r, &req, http.StatusBadRequest, "invalid json: "+textTooLarge) {
		return
	}
	if req.Child == "" {
		writeError(w, http.StatusBadRequest, "invalid argument: child required")
		return
	}
	var delay int64
	if req.DelayMs != nil {
		delay = *req.DelayMs
	}
	t, err := h.node.AttachChild(r.Context(), r.PathValue("topic"), req.Child, delay)
	if err != nil {
		topicFailed(w, err, "attach child")
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (h *handlers) children(w http.ResponseWriter, r *http.Request) {
	list, err := h.node.Children(r.Context(), r.PathValue("topic"))
	if err != nil {
		topicFailed(w, err, "list children")
		return
	}
	if list.Children == nil {
		list.Children = []messages.ChildInfo{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *handlers) detachChild(w http.ResponseWriter, r *http.Request) {
	if err := h.node.DetachChild(r.Context(), r.PathValue("topic"), r.PathValue("child")); err != nil {
		topicFailed(w, err, "detach child")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
