package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/naradmq/narad/messages"
)

// MaxClockStep bounds one step of POST /debug/faults/clock either way: a
// fault run steps a clock by seconds or minutes, and a typo of an extra
// few digits would push every lease and freeze past any run's length.
const MaxClockStep = time.Hour

// Faults is a node's switches for a fault-injection run (narad serve
// --debug-faults); Options.Faults nil serves none of its routes.
type Faults interface {
	// SetDiskFault turns the storage's fault mode to fail ("off",
	// "fsync", "write"); another name is an error wrapping ErrInvalid.
	SetDiskFault(fail string) error
	// StepClock moves the node's injected clock by d, on top of the
	// steps before.
	StepClock(d time.Duration)
	// FaultsStatus is the switches as they are now.
	FaultsStatus() messages.FaultsStatus
}

// faultRoutes serves the switches of f under /debug/faults, for an admin.
func faultRoutes(mux *http.ServeMux, f Faults) {
	mux.HandleFunc("GET /debug/faults", needAdmin(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, f.FaultsStatus())
	}))
	mux.HandleFunc("POST /debug/faults/disk", needAdmin(func(w http.ResponseWriter, r *http.Request) {
		var req messages.DiskFaultRequest
		if !readJSON(w, r, &req) {
			return
		}
		if err := f.SetDiskFault(req.Fail); err != nil {
			if errors.Is(err, ErrInvalid) {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid argument: fail %q: want fsync, write or off", req.Fail))
				return
			}
			writeError(w, http.StatusInternalServerError, "set disk fault failed")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("POST /debug/faults/clock", needAdmin(func(w http.ResponseWriter, r *http.Request) {
		var req messages.ClockStepRequest
		if !readJSON(w, r, &req) {
			return
		}
		limit := MaxClockStep.Milliseconds()
		if req.StepMs == nil || *req.StepMs < -limit || *req.StepMs > limit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid argument: step_ms required, within ±%d", limit))
			return
		}
		f.StepClock(time.Duration(*req.StepMs) * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	}))
}
