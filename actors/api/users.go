package api

import (
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/naradmq/narad/messages"
)

var (
	usernamePattern     = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	grantPatternPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{0,255}\*?$`)
)

const textUserNotFound = "user not found"

// userAnswers are the answers to a failed user operation (§13).
var userAnswers = []answer{
	{ErrNotFound, http.StatusNotFound, textUserNotFound},
	{ErrConflict, http.StatusConflict, "already exists"},
	{ErrInvalid, http.StatusBadRequest, ""},
	{ErrUnavailable, http.StatusServiceUnavailable, textControlPlane},
}

func userFailed(w http.ResponseWriter, err error, op string) {
	writeFailure(w, err, userAnswers, http.StatusInternalServerError, op+" failed")
}

// readUserJSON reads a user request body strictly into v; the user routes
// answer a body past 1 MiB with 400, not 413 (§1).
func readUserJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return readJSONOr(w, r, v, http.StatusBadRequest, "invalid json: "+textTooLarge)
}

// grantsProblem says what is wrong with grants ("" when nothing is).
func grantsProblem(grants []messages.Grant) string {
	for _, g := range grants {
		switch g.Action {
		case ActionAdmin:
			if g.Patterns != nil {
				return "admin grants take no patterns"
			}
		case ActionProduce, ActionConsume, ActionCreate:
			if len(g.Patterns) == 0 {
				return g.Action + " grants need at least one pattern"
			}
			for _, p := range g.Patterns {
				if !grantPatternPattern.MatchString(p) {
					return "invalid grant pattern " + p
				}
			}
		default:
			return "unknown grant action " + g.Action
		}
	}
	return ""
}

// escalates says whether giving grants would hand out more than giver
// holds: only root gives admin, and every other grant must be covered by
// one of the giver's (an admin grant covers every scoped one).
func escalates(giver messages.UserInfo, grants []messages.Grant) bool {
	if giver.Root {
		return false
	}
	for _, g := range grants {
		if g.Action == ActionAdmin {
			return true
		}
		for _, p := range g.Patterns {
			if !holds(giver, g.Action, p) {
				return true
			}
		}
	}
	return false
}

// holds says whether u's grants cover action on every name pattern p
// matches.
func holds(u messages.UserInfo, action, p string) bool {
	for _, g := range u.Grants {
		if g.Action == ActionAdmin {
			return true
		}
		if g.Action != action {
			continue
		}
		for _, mine := range g.Patterns {
			if covers(mine, p) {
				return true
			}
		}
	}
	return false
}

// covers says whether every name that p matches, mine matches too.
func covers(mine, p string) bool {
	prefix, wild := strings.CutSuffix(mine, "*")
	if !wild {
		return mine == p
	}
	return strings.HasPrefix(strings.TrimSuffix(p, "*"), prefix)
}

func (h *handlers) createUser(w http.ResponseWriter, r *http.Request) {
	var req messages.CreateUserRequest
	if !readUserJSON(w, r, &req) {
		return
	}
	switch {
	case !usernamePattern.MatchString(req.Username):
		writeError(w, http.StatusBadRequest, "invalid argument: invalid username")
		return
	case req.Password == "":
		writeError(w, http.StatusBadRequest, "invalid argument: password required")
		return
	}
	if why := grantsProblem(req.Grants); why != "" {
		writeError(w, http.StatusBadRequest, "invalid argument: "+why)
		return
	}
	if escalates(principal(r), req.Grants) {
		writeError(w, http.StatusForbidden, "cannot grant privileges you do not hold")
		return
	}
	u, err := h.node.CreateUser(r.Context(), req)
	if err != nil {
		userFailed(w, err, "create user")
		return
	}
	writeJSON(w, http.StatusCreated, u)
}

func (h *handlers) listUsers(w http.ResponseWriter, _ *http.Request) {
	us := h.node.Users()
	if us == nil {
		us = []messages.UserInfo{}
	}
	writeJSON(w, http.StatusOK, us)
}

func (h *handlers) getUser(w http.ResponseWriter, r *http.Request) {
	u, err := h.node.User(r.PathValue("username"))
	if err != nil {
		userFailed(w, err, "get user")
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (h *handlers) deleteUser(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("username")
	target, err := h.node.User(name)
	if err != nil {
		userFailed(w, err, "delete user")
		return
	}
	if target.Root || name == principal(r).Username {
		writeError(w, http.StatusForbidden, "cannot delete the root user or yourself")
		return
	}
	if err := h.node.DeleteUser(r.Context(), name); err != nil {
		userFailed(w, err, "delete user")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) setGrants(w http.ResponseWriter, r *http.Request) {
	var req messages.GrantsRequest
	if !readUserJSON(w, r, &req) {
		return
	}
	if why := grantsProblem(req.Grants); why != "" {
		writeError(w, http.StatusBadRequest, "invalid argument: "+why)
		return
	}
	name, caller := r.PathValue("username"), principal(r)
	target, err := h.node.User(name)
	if err != nil {
		userFailed(w, err, "set grants")
		return
	}
	switch {
	case target.Root:
		writeError(w, http.StatusForbidden, "cannot change the grants of the root user")
		return
	case name == caller.Username:
		writeError(w, http.StatusForbidden, "cannot change your own grants")
		return
	case escalates(caller, req.Grants):
		writeError(w, http.StatusForbidden, "cannot grant privileges you do not hold")
		return
	}
	u, err := h.node.SetGrants(r.Context(), name, req.Grants)
	if err != nil {
		userFailed(w, err, "set grants")
		return
	}
	writeJSON(w, http.StatusOK, u)
}

// setPassword is open to every authenticated caller: an admin changes
// anyone's but root's (only root does that), and a user their own with the
// right current_password.
func (h *handlers) setPassword(w http.ResponseWriter, r *http.Request) {
	var req messages.PasswordRequest
	if !readUserJSON(w, r, &req) {
		return
	}
	if req.NewPassword == "" {
		writeError(w, http.StatusBadRequest, "new_password required")
		return
	}
	name, caller := r.PathValue("username"), principal(r)
	self := name == caller.Username && caller.Username != ""
	if !self && !isAdmin(caller) {
		writeError(w, http.StatusForbidden, textAdminRequired)
		return
	}
	target, err := h.node.User(name)
	if err != nil {
		userFailed(w, err, "set password")
		return
	}
	if target.Root && !caller.Root {
		writeError(w, http.StatusForbidden, "only root may change the root user's password")
		return
	}
	if self && (!isAdmin(caller) || req.CurrentPassword != "") {
		if _, err := h.node.Authenticate(r.Context(), name, req.CurrentPassword); err != nil {
			if !errors.Is(err, ErrUnauthenticated) {
				writeError(w, http.StatusInternalServerError, textAuthUnavailable)
				return
			}
			writeError(w, http.StatusForbidden, "current_password is wrong")
			return
		}
	}
	if err := h.node.SetPassword(r.Context(), name, req.NewPassword); err != nil {
		userFailed(w, err, "set password")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// whoami answers the caller as authenticated (beyond the contract): any
// user may ask, so a client can show only the actions its grants allow.
// While security is off every request is root, an admin.
func (h *handlers) whoami(w http.ResponseWriter, r *http.Request) {
	u := principal(r)
	grants := u.Grants
	if grants == nil {
		grants = []messages.Grant{}
	}
	writeJSON(w, http.StatusOK, messages.WhoAmI{Username: u.Username, Admin: isAdmin(u), Grants: grants})
}
